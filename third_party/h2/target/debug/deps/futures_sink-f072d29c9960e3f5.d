/work/main/third_party/h2/target/debug/deps/futures_sink-f072d29c9960e3f5.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/futures-sink-0.3.34/src/lib.rs

/work/main/third_party/h2/target/debug/deps/libfutures_sink-f072d29c9960e3f5.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/futures-sink-0.3.34/src/lib.rs

/work/main/third_party/h2/target/debug/deps/libfutures_sink-f072d29c9960e3f5.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/futures-sink-0.3.34/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/futures-sink-0.3.34/src/lib.rs:
