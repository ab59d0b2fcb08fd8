/work/main/third_party/h2/target/debug/deps/equivalent-e2191e5120b37bb1.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/equivalent-1.0.3/src/lib.rs

/work/main/third_party/h2/target/debug/deps/libequivalent-e2191e5120b37bb1.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/equivalent-1.0.3/src/lib.rs

/work/main/third_party/h2/target/debug/deps/libequivalent-e2191e5120b37bb1.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/equivalent-1.0.3/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/equivalent-1.0.3/src/lib.rs:
