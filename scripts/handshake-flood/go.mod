module tlsgate.local/handshake-flood

go 1.24
