/work/main/third_party/h2/target/debug/deps/pin_project_lite-d7a7c9f9297e44b9.d: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pin-project-lite-0.2.17/src/lib.rs

/work/main/third_party/h2/target/debug/deps/libpin_project_lite-d7a7c9f9297e44b9.rlib: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pin-project-lite-0.2.17/src/lib.rs

/work/main/third_party/h2/target/debug/deps/libpin_project_lite-d7a7c9f9297e44b9.rmeta: /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pin-project-lite-0.2.17/src/lib.rs

/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/pin-project-lite-0.2.17/src/lib.rs:
