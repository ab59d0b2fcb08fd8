module tlsgate.local/proxy-compare/ratelat

go 1.25.0
