//! The spare connection IDs a connection offers its client, and their routing.
//!
//! A client that moves to a new path (a port or network of its own choosing) must use a
//! connection ID it has not used on another path (RFC 9000 §9.5): without a spare one it cannot
//! probe at all (Chromium gives its port migration up at once). So once the handshake is done
//! each connection keeps [`SPARE`] IDs beyond the one in use offered in NEW_CONNECTION_ID frames
//! (fewer when the client's `active_connection_id_limit` is lower), each with its own stateless
//! reset token and the worker byte of its owner ([`cid`]), and replaces those the client retires.
//! The endpoint routes by ID, so every issued ID is registered with it ([`IdChange::Issued`])
//! and every retired one, and all of them when the connection ends, forgotten
//! ([`IdChange::Retired`]).

use super::cid::{self, Secret};
use tokio::sync::mpsc;

/// IDs a connection keeps offered beyond the one the client uses now.
pub const SPARE: usize = 3;

/// What a connection tells its endpoint about the IDs that route to it.
#[derive(Debug)]
pub enum IdChange {
    /// `id` now names the connection that `of` names.
    Issued {
        /// An ID already routed to the connection.
        of: Vec<u8>,
        /// The new one.
        id: Vec<u8>,
    },
    /// These IDs name nothing any more.
    Retired(Vec<Vec<u8>>),
}

/// One connection's IDs as its endpoint routes them.
pub struct Ids {
    /// Every ID routed to the connection (its first, and the client's own Initial ID).
    pub routed: Vec<Vec<u8>>,
    worker: usize,
    secret: Secret,
    endpoint: mpsc::UnboundedSender<IdChange>,
}

impl Ids {
    /// The IDs `routed` for a connection of `worker`, registered with `endpoint`.
    pub fn new(routed: Vec<Vec<u8>>, worker: usize, secret: Secret, endpoint: mpsc::UnboundedSender<IdChange>) -> Self {
        Self {
            routed,
            worker,
            secret,
            endpoint,
        }
    }

    /// Forgets the IDs the client retired and offers new ones up to [`SPARE`] (call once the
    /// handshake is done, when the client's limit is known).
    pub fn refresh(&mut self, conn: &mut quiche::Connection) {
        let mut retired = Vec::new();
        while let Some(id) = conn.retired_scid_next() {
            retired.push(id.to_vec());
        }
        if !retired.is_empty() {
            self.routed.retain(|id| !retired.contains(id));
            let _ = self.endpoint.send(IdChange::Retired(retired));
        }
        let room = conn.scids_left().min((SPARE + 1).saturating_sub(conn.active_scids()));
        for _ in 0..room {
            let Some(of) = self.routed.last().cloned() else { return };
            let id = cid::new_cid(self.worker);
            if conn.new_scid(&id, self.secret.reset_token(&id), false).is_err() {
                return;
            }
            let id = id.to_vec();
            self.routed.push(id.clone());
            let _ = self.endpoint.send(IdChange::Issued { of, id });
        }
    }

    /// The connection has ended: the endpoint forgets every ID.
    pub fn release(self) {
        let _ = self.endpoint.send(IdChange::Retired(self.routed));
    }
}
