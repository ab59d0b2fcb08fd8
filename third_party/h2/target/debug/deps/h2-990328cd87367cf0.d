/work/main/third_party/h2/target/debug/deps/h2-990328cd87367cf0.d: src/lib.rs src/codec/mod.rs src/codec/error.rs src/codec/framed_read.rs src/codec/framed_write.rs src/error.rs src/hpack/mod.rs src/hpack/decoder.rs src/hpack/encoder.rs src/hpack/header.rs src/hpack/huffman/mod.rs src/hpack/huffman/decode.rs src/hpack/huffman/encode.rs src/hpack/huffman/table.rs src/hpack/table.rs src/hpack/test/mod.rs src/hpack/test/fixture.rs src/hpack/test/fuzz.rs src/proto/mod.rs src/proto/connection.rs src/proto/error.rs src/proto/go_away.rs src/proto/peer.rs src/proto/ping_pong.rs src/proto/settings.rs src/proto/streams/mod.rs src/proto/streams/buffer.rs src/proto/streams/counts.rs src/proto/streams/flow_control.rs src/proto/streams/prioritize.rs src/proto/streams/recv.rs src/proto/streams/send.rs src/proto/streams/state.rs src/proto/streams/store.rs src/proto/streams/stream.rs src/proto/streams/streams.rs src/frame/mod.rs src/frame/data.rs src/frame/go_away.rs src/frame/head.rs src/frame/headers.rs src/frame/ping.rs src/frame/priority.rs src/frame/reason.rs src/frame/reset.rs src/frame/settings.rs src/frame/stream_id.rs src/frame/util.rs src/frame/window_update.rs src/client.rs src/ext.rs src/server.rs src/share.rs

/work/main/third_party/h2/target/debug/deps/h2-990328cd87367cf0: src/lib.rs src/codec/mod.rs src/codec/error.rs src/codec/framed_read.rs src/codec/framed_write.rs src/error.rs src/hpack/mod.rs src/hpack/decoder.rs src/hpack/encoder.rs src/hpack/header.rs src/hpack/huffman/mod.rs src/hpack/huffman/decode.rs src/hpack/huffman/encode.rs src/hpack/huffman/table.rs src/hpack/table.rs src/hpack/test/mod.rs src/hpack/test/fixture.rs src/hpack/test/fuzz.rs src/proto/mod.rs src/proto/connection.rs src/proto/error.rs src/proto/go_away.rs src/proto/peer.rs src/proto/ping_pong.rs src/proto/settings.rs src/proto/streams/mod.rs src/proto/streams/buffer.rs src/proto/streams/counts.rs src/proto/streams/flow_control.rs src/proto/streams/prioritize.rs src/proto/streams/recv.rs src/proto/streams/send.rs src/proto/streams/state.rs src/proto/streams/store.rs src/proto/streams/stream.rs src/proto/streams/streams.rs src/frame/mod.rs src/frame/data.rs src/frame/go_away.rs src/frame/head.rs src/frame/headers.rs src/frame/ping.rs src/frame/priority.rs src/frame/reason.rs src/frame/reset.rs src/frame/settings.rs src/frame/stream_id.rs src/frame/util.rs src/frame/window_update.rs src/client.rs src/ext.rs src/server.rs src/share.rs

src/lib.rs:
src/codec/mod.rs:
src/codec/error.rs:
src/codec/framed_read.rs:
src/codec/framed_write.rs:
src/error.rs:
src/hpack/mod.rs:
src/hpack/decoder.rs:
src/hpack/encoder.rs:
src/hpack/header.rs:
src/hpack/huffman/mod.rs:
src/hpack/huffman/decode.rs:
src/hpack/huffman/encode.rs:
src/hpack/huffman/table.rs:
src/hpack/table.rs:
src/hpack/test/mod.rs:
src/hpack/test/fixture.rs:
src/hpack/test/fuzz.rs:
src/proto/mod.rs:
src/proto/connection.rs:
src/proto/error.rs:
src/proto/go_away.rs:
src/proto/peer.rs:
src/proto/ping_pong.rs:
src/proto/settings.rs:
src/proto/streams/mod.rs:
src/proto/streams/buffer.rs:
src/proto/streams/counts.rs:
src/proto/streams/flow_control.rs:
src/proto/streams/prioritize.rs:
src/proto/streams/recv.rs:
src/proto/streams/send.rs:
src/proto/streams/state.rs:
src/proto/streams/store.rs:
src/proto/streams/stream.rs:
src/proto/streams/streams.rs:
src/frame/mod.rs:
src/frame/data.rs:
src/frame/go_away.rs:
src/frame/head.rs:
src/frame/headers.rs:
src/frame/ping.rs:
src/frame/priority.rs:
src/frame/reason.rs:
src/frame/reset.rs:
src/frame/settings.rs:
src/frame/stream_id.rs:
src/frame/util.rs:
src/frame/window_update.rs:
src/client.rs:
src/ext.rs:
src/server.rs:
src/share.rs:

# env-dep:CARGO_MANIFEST_DIR=/work/main/third_party/h2
