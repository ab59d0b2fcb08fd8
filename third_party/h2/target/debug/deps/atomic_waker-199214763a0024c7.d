/work/main/third_party/h2/target/debug/deps/atomic_waker-199214763a0024c7.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/atomic-waker-1.1.2/src/lib.rs

/work/main/third_party/h2/target/debug/deps/libatomic_waker-199214763a0024c7.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/atomic-waker-1.1.2/src/lib.rs

/work/main/third_party/h2/target/debug/deps/libatomic_waker-199214763a0024c7.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/atomic-waker-1.1.2/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/atomic-waker-1.1.2/src/lib.rs:
