use crate::codec::UserError;
use crate::error::Reason;
use crate::proto::*;
use std::task::{Context, Poll};

#[derive(Debug)]
pub(crate) struct Settings {
    /// Our local SETTINGS sync state with the remote.
    local: Local,
    /// Received SETTINGS frame pending processing. The ACK must be written to
    /// the socket first then the settings applied **before** receiving any
    /// further frames.
    remote: Option<frame::Settings>,
    /// Whether the connection has received the initial SETTINGS frame from the
    /// remote peer.
    has_received_remote_initial_settings: bool,
    /// tlsgate: where an idle connection's emptying of the HPACK decoder table stands.
    idle_table: IdleTable,
    /// tlsgate: the SETTINGS_HEADER_TABLE_SIZE this connection announced (what a restore
    /// announces again).
    header_table_size: u32,
}

/// tlsgate: an idle connection asks the peer to empty the HPACK table its header blocks fill on
/// this side (SETTINGS_HEADER_TABLE_SIZE 0; the table is dropped when the peer acknowledges it),
/// and announces the table again with the first request after that: at most one change between
/// two of the peer's header blocks, so its encoder has no intermediate size to signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IdleTable {
    /// The table as announced (or no emptying asked for).
    Kept,
    /// SETTINGS_HEADER_TABLE_SIZE 0 queued or sent, its ACK not yet received.
    Emptying,
    /// Acknowledged: the table is empty; announced again with the next request.
    Emptied,
}

#[derive(Debug)]
enum Local {
    /// We want to send these SETTINGS to the remote when the socket is ready.
    ToSend(frame::Settings),
    /// We have sent these SETTINGS and are waiting for the remote to ACK
    /// before we apply them.
    WaitingAck(frame::Settings),
    /// Our local settings are in sync with the remote.
    Synced,
}

impl Settings {
    pub(crate) fn new(local: frame::Settings) -> Self {
        let header_table_size = local
            .header_table_size()
            .unwrap_or(crate::frame::DEFAULT_SETTINGS_HEADER_TABLE_SIZE as u32);
        Settings {
            idle_table: IdleTable::Kept,
            header_table_size,
            // We assume the initial local SETTINGS were flushed during
            // the handshake process.
            local: Local::WaitingAck(local),
            remote: None,
            has_received_remote_initial_settings: false,
        }
    }

    pub(crate) fn recv_settings<T, B, C, P>(
        &mut self,
        frame: frame::Settings,
        codec: &mut Codec<T, B>,
        streams: &mut Streams<C, P>,
    ) -> Result<(), Error>
    where
        T: AsyncWrite + Unpin,
        B: Buf,
        C: Buf,
        P: Peer,
    {
        if frame.is_ack() {
            match &self.local {
                Local::WaitingAck(local) => {
                    tracing::debug!("received settings ACK; applying {:?}", local);

                    if let Some(max) = local.max_frame_size() {
                        codec.set_max_recv_frame_size(max as usize);
                    }

                    if let Some(max) = local.max_header_list_size() {
                        codec.set_max_recv_header_list_size(max as usize);
                    }

                    if let Some(val) = local.header_table_size() {
                        codec.set_recv_header_table_size(val as usize);
                        if val == 0 && self.idle_table == IdleTable::Emptying {
                            self.idle_table = IdleTable::Emptied;
                        }
                    }

                    streams.apply_local_settings(local)?;
                    self.local = Local::Synced;
                    Ok(())
                }
                Local::ToSend(..) | Local::Synced => {
                    // We haven't sent any SETTINGS frames to be ACKed, so
                    // this is very bizarre! Remote is either buggy or malicious.
                    proto_err!(conn: "received unexpected settings ack");
                    Err(Error::library_go_away(Reason::PROTOCOL_ERROR))
                }
            }
        } else {
            // We always ACK before reading more frames, so `remote` should
            // always be none!
            assert!(self.remote.is_none());
            self.remote = Some(frame);
            Ok(())
        }
    }

    /// tlsgate: asks the peer to empty the HPACK table its header blocks fill here (an idle
    /// connection's). Not while other SETTINGS of ours wait for their ACK (the next idle spell
    /// asks again), nor when the connection announced no table.
    pub(crate) fn empty_idle_table(&mut self) {
        if self.idle_table != IdleTable::Kept || self.header_table_size == 0 {
            return;
        }
        let mut settings = frame::Settings::default();
        settings.set_header_table_size(Some(0));
        if self.send_settings(settings).is_ok() {
            self.idle_table = IdleTable::Emptying;
        }
    }

    /// tlsgate: whether the peer has acknowledged an emptying and the table waits to be
    /// announced again.
    pub(crate) fn idle_table_emptied(&self) -> bool {
        self.idle_table == IdleTable::Emptied
    }

    /// tlsgate: a request arrived after an emptying was acknowledged: announces the table again
    /// (when no other SETTINGS of ours are pending; otherwise at a later request).
    pub(crate) fn restore_idle_table(&mut self) {
        if self.idle_table != IdleTable::Emptied {
            return;
        }
        let mut settings = frame::Settings::default();
        settings.set_header_table_size(Some(self.header_table_size));
        if self.send_settings(settings).is_ok() {
            self.idle_table = IdleTable::Kept;
        }
    }

    pub(crate) fn send_settings(&mut self, frame: frame::Settings) -> Result<(), UserError> {
        assert!(!frame.is_ack());
        match &self.local {
            Local::ToSend(..) | Local::WaitingAck(..) => Err(UserError::SendSettingsWhilePending),
            Local::Synced => {
                tracing::trace!("queue to send local settings: {:?}", frame);
                self.local = Local::ToSend(frame);
                Ok(())
            }
        }
    }

    /// Sets `true` to `self.has_received_remote_initial_settings`.
    /// Returns `true` if this method is called for the first time.
    /// (i.e. it is the initial SETTINGS frame from the remote peer)
    fn mark_remote_initial_settings_as_received(&mut self) -> bool {
        let has_received = self.has_received_remote_initial_settings;
        self.has_received_remote_initial_settings = true;
        !has_received
    }

    pub(crate) fn poll_send<T, B, C, P>(
        &mut self,
        cx: &mut Context,
        dst: &mut Codec<T, B>,
        streams: &mut Streams<C, P>,
    ) -> Poll<Result<(), Error>>
    where
        T: AsyncWrite + Unpin,
        B: Buf,
        C: Buf,
        P: Peer,
    {
        if let Some(settings) = self.remote.clone() {
            if !dst.poll_ready(cx)?.is_ready() {
                return Poll::Pending;
            }

            // Create an ACK settings frame
            let frame = frame::Settings::ack();

            // Buffer the settings frame
            dst.buffer(frame.into()).expect("invalid settings frame");

            tracing::trace!("ACK sent; applying settings");

            let is_initial = self.mark_remote_initial_settings_as_received();
            streams.apply_remote_settings(&settings, is_initial)?;

            if let Some(val) = settings.header_table_size() {
                dst.set_send_header_table_size(val as usize);
            }

            if let Some(val) = settings.max_frame_size() {
                dst.set_max_send_frame_size(val as usize);
            }
        }

        self.remote = None;

        match &self.local {
            Local::ToSend(settings) => {
                if !dst.poll_ready(cx)?.is_ready() {
                    return Poll::Pending;
                }

                // Buffer the settings frame
                dst.buffer(settings.clone().into())
                    .expect("invalid settings frame");
                tracing::trace!("local settings sent; waiting for ack: {:?}", settings);

                self.local = Local::WaitingAck(settings.clone());
            }
            Local::WaitingAck(..) | Local::Synced => {}
        }

        Poll::Ready(Ok(()))
    }
}
