module tlsgate.local/tlsload

go 1.24
