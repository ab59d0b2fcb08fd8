module tlsgate.test/h2client

go 1.23
