/work/main/third_party/h2/target/debug/deps/fnv-ab3b3d0161207bc5.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/fnv-1.0.7/lib.rs

/work/main/third_party/h2/target/debug/deps/libfnv-ab3b3d0161207bc5.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/fnv-1.0.7/lib.rs

/work/main/third_party/h2/target/debug/deps/libfnv-ab3b3d0161207bc5.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/fnv-1.0.7/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/fnv-1.0.7/lib.rs:
