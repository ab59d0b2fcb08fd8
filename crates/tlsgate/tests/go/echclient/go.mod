module tlsgate.test/echclient

go 1.23
