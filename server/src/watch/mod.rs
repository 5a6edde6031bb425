//! Watching a running session's terminal live, read-only: one [`Hub`] per watched session on
//! the replica that serves its terminal. The relay hands the hub every piece of output it tees
//! into the recording (under the hub's lock, so a watcher's first screen and the stream after
//! it meet without a gap or an overlap); the hub keeps the screen in a server-side terminal
//! emulator (asciinema's `avt`) only while someone watches, on a thread of its own and fed
//! lazily (`feed.rs`: output that scrolled off before anyone asked for the screen is never
//! emulated, the emulator costing several times what the relay does), and fans the output out
//! to each watcher's own bounded queue. A watcher whose queue is full is skipped from then on and told
//! to catch up: it drops what it had queued and gets a fresh screen, so a slow watcher never
//! slows the requester or the pod. Who watches (and whether an approver is among them, which a
//! moderated session's input waits for) is the hub's [`Audience`], which the relay follows.
//!
//! Nothing a watcher sends goes anywhere: the socket's reader discards it (`watching/mod.rs`).

mod feed;
mod screen;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use breakglass_shared::terminal::Status;
use breakglass_shared::SessionState;
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch, Notify};
use uuid::Uuid;

use crate::recording::{CastWriter, RecordingFailed, RecordingStore};
use screen::Screen;

/// Frames a watcher may have queued before it counts as behind: 128 frames of at most
/// 64 KiB, a few MiB at worst, bounded whatever the pod prints.
pub const QUEUE: usize = 128;

/// Batches (of about [`BATCH`] bytes) and requests the painter (the emulator's own thread) may
/// have waiting: a few MiB. Past it the painter is dropped rather than the relay slowed, and
/// the next watcher to catch up draws the screen from the recording again.
const PAINT_QUEUE: usize = 16;

/// Output the relay gathers before handing it to the painter in one go: a handover wakes the
/// painter's thread, and the screen is only needed when a watcher asks for it (every request
/// hands over what was gathered first).
const BATCH: usize = 256 * 1024;

/// Output held while a first screen is drawn from the recording; past it the drawing is
/// thrown away when done and drawn again from a later cut (memory stays bounded under a flood).
const HOLD_WHILE_DRAWING: usize = 8 * 1024 * 1024;

/// What the painter is handed, in the order of the output.
enum Paint {
    Output(Vec<Bytes>),
    Resize(u16, u16),
    /// The frames that draw the screen as it is after everything before this.
    Frames(oneshot::Sender<Vec<Bytes>>),
}

/// Where the screen is kept.
enum Keep {
    /// Nobody watches (or the painter fell too far behind).
    Off,
    /// A watcher draws it from the recording (the draw's number); what came since the cut.
    Building(u64, Screen),
    /// The painter has it: a thread of its own feeds the emulator, so a watched terminal's
    /// relay only gathers the pieces and hands them over now and then.
    Painting {
        /// To the painter.
        to: mpsc::Sender<Paint>,
        /// Output not handed over yet.
        batch: Vec<Bytes>,
        /// Its bytes.
        gathered: usize,
    },
}

/// The painter: feeds the emulator on a blocking thread until the hub drops its sender.
fn paint(mut screen: Screen, mut work: mpsc::Receiver<Paint>) {
    while let Some(p) = work.blocking_recv() {
        match p {
            Paint::Output(pieces) => {
                for piece in pieces {
                    screen.output(piece);
                }
            }
            Paint::Resize(cols, rows) => screen.resize(cols, rows),
            Paint::Frames(reply) => {
                let _ = reply.send(screen.frames().unwrap_or_default());
            }
        }
    }
    tracing::debug!(skipped = screen.skipped(), "the painter stopped");
}

/// Who watches a session now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Audience {
    /// The watchers' names, in the order they came (a name watching twice is listed once).
    pub names: Vec<String>,
    /// How many of the watchers moderate (`Session::moderates`): a moderated session takes
    /// input only while this is above zero.
    pub moderators: usize,
}

/// The status the requester and the watchers get: who watches, and whether a moderated
/// session's input waits.
pub fn audience_status(audience: &Audience, moderated: bool, message: String) -> Status {
    Status {
        state: SessionState::Active,
        message,
        watchers: audience.names.clone(),
        paused: moderated && audience.moderators == 0,
    }
}

/// The watched sessions of this replica.
#[derive(Default)]
pub struct Watches {
    hubs: Mutex<HashMap<Uuid, Weak<Hub>>>,
}

impl Watches {
    /// The hub of session `id`, made on first use; it lives while the relay or a watcher holds
    /// it.
    pub fn hub(&self, id: Uuid) -> Arc<Hub> {
        let mut hubs = self.hubs.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hub) = hubs.get(&id).and_then(Weak::upgrade) {
            return hub;
        }
        hubs.retain(|_, h| h.strong_count() > 0);
        let hub = Arc::new(Hub::new());
        hubs.insert(id, Arc::downgrade(&hub));
        hub
    }

    /// Closes every watcher of session `id` with `reason` (the session ended, or its terminal
    /// moved to another replica) and forgets the hub: a later watcher starts afresh.
    pub fn close(&self, id: Uuid, code: u16, reason: &str) {
        let hub = self
            .hubs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id)
            .and_then(|h| h.upgrade());
        if let Some(hub) = hub {
            hub.closed.send_replace(Some((code, reason.to_string())));
        }
    }

    /// Who watches session `id` on this replica.
    pub fn audience(&self, id: Uuid) -> Audience {
        let hub = self
            .hubs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .and_then(Weak::upgrade);
        hub.map(|h| h.audience.borrow().clone()).unwrap_or_default()
    }
}

/// One watched session.
pub struct Hub {
    inner: Mutex<Inner>,
    audience: watch::Sender<Audience>,
    closed: watch::Sender<Option<(u16, String)>>,
}

struct Inner {
    screen: Keep,
    seats: Vec<Seat>,
    next: u64,
    /// Draws of the screen from the recording begun so far.
    draws: u64,
}

/// One watcher as the hub holds it.
struct Seat {
    key: u64,
    name: String,
    moderates: bool,
    queue: mpsc::Sender<Bytes>,
    /// Gets live frames: its first screen was queued and it has not fallen behind since.
    live: bool,
    /// Told when its queue overflowed (it then catches up) or its first screen is ready.
    nudge: Arc<Notify>,
}

/// What a watcher holds: its queue, the nudge that says "catch up", and its seat (given back
/// when this is dropped).
pub struct Joined {
    /// Frames for the watcher's socket, in order.
    pub queue: mpsc::Receiver<Bytes>,
    /// Fires when the watcher must [`Hub::catch_up`]: its first screen is ready, or it fell
    /// behind.
    pub nudge: Arc<Notify>,
    /// The seat's key.
    pub key: u64,
    name: String,
    writer: CastWriter,
    hub: Arc<Hub>,
}

impl Drop for Joined {
    fn drop(&mut self) {
        self.hub.leave(self.key);
        let _ = self.writer.marker(&format!("left: {}", self.name));
    }
}

/// What a nudged watcher does next.
#[derive(Debug)]
pub enum CatchUp {
    /// Send the frames this answers with (the screen drawn from scratch, as it is just before
    /// the first live frame queued after it); live frames follow in the queue.
    Frames(oneshot::Receiver<Vec<Bytes>>),
    /// Another watcher is drawing the screen: wait for the next nudge.
    Wait,
    /// Nobody watched: draw the screen from the recording's first `len` bytes
    /// ([`Hub::first_screen`], with this `draw`'s number).
    Draw {
        /// Where the cut is.
        len: u64,
        /// Which draw this is: one overtaken by a later one is thrown away.
        draw: u64,
    },
}

impl Hub {
    fn new() -> Hub {
        Hub {
            inner: Mutex::new(Inner {
                screen: Keep::Off,
                seats: Vec::new(),
                next: 0,
                draws: 0,
            }),
            audience: watch::channel(Audience::default()).0,
            closed: watch::channel(None).0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Who watches; the receiver sees each change.
    pub fn audience(&self) -> watch::Receiver<Audience> {
        self.audience.subscribe()
    }

    /// Set once the hub's watchers must close: the close code and why.
    pub fn closed(&self) -> watch::Receiver<Option<(u16, String)>> {
        self.closed.subscribe()
    }

    /// Tees a piece of output into the recording and, while someone watches, into the screen
    /// and every live watcher's queue (`frame` is the piece as a data frame). One lock for
    /// both, so a first screen drawn from the recording's first `n` bytes and the frames after
    /// it are exactly the output, once.
    pub fn output(
        &self,
        writer: &CastWriter,
        piece: &[u8],
        frame: &Bytes,
    ) -> Result<(), RecordingFailed> {
        let mut inner = self.lock();
        writer.output(piece)?;
        if inner.seats.is_empty() {
            return Ok(());
        }
        inner.paint(Paint::Output(vec![frame.slice(1..)]));
        inner.fan_out(frame);
        Ok(())
    }

    /// A resize of the terminal, recorded, drawn and passed on to the watchers.
    pub fn resize(&self, writer: &CastWriter, cols: u16, rows: u16) -> Result<(), RecordingFailed> {
        let mut inner = self.lock();
        writer.resize(cols, rows)?;
        if inner.seats.is_empty() {
            return Ok(());
        }
        inner.paint(Paint::Resize(cols, rows));
        let frame = breakglass_shared::terminal::Frame::Resize { cols, rows }.encode();
        inner.fan_out(&Bytes::from(frame));
        Ok(())
    }

    /// Seats a watcher (a `watching` marker in the recording); its nudge fires at once, and
    /// [`Hub::catch_up`] then says what to do.
    pub fn join(self: &Arc<Self>, writer: &CastWriter, name: &str, moderates: bool) -> Joined {
        let (tx, rx) = mpsc::channel(QUEUE);
        let nudge = Arc::new(Notify::new());
        nudge.notify_one();
        let mut inner = self.lock();
        let key = inner.next;
        inner.next += 1;
        inner.seats.push(Seat {
            key,
            name: name.to_string(),
            moderates,
            queue: tx,
            live: false,
            nudge: nudge.clone(),
        });
        let audience = inner.audience();
        drop(inner);
        let _ = writer.marker(&format!("watching: {name}"));
        self.audience.send_replace(audience);
        Joined {
            queue: rx,
            nudge,
            key,
            name: name.to_string(),
            writer: writer.clone(),
            hub: self.clone(),
        }
    }

    /// Draws the first screen from the recording's first `len` bytes (stored first, then read
    /// back) and what came after them, and nudges every seated watcher to take it. On a
    /// failure the screen is left off and the error is for the caller to close with; dropped
    /// before it ends (its watcher closed while the store was slow), the same without one.
    pub async fn first_screen(
        &self,
        writer: &CastWriter,
        store: &dyn RecordingStore,
        len: u64,
        draw: u64,
    ) -> Result<(), String> {
        // Dropped before the end (the draw failed, or the watcher drawing it left while it
        // waited for the store), this gives the draw up, so the others do not wait for it.
        let mut unfinished = Unfinished {
            hub: self,
            draw,
            armed: true,
        };
        let drawn = async {
            #[cfg(feature = "failpoints")]
            crate::failpoint::pause(crate::failpoint::Failpoint::FirstScreen).await;
            let stored = writer
                .stored_through(len)
                .await
                .map_err(|e| e.to_string())?;
            let cast = crate::recording::segment::read_recording(store, &stored, true)
                .await
                .map_err(|e| format!("cannot read the recording: {e}"))?;
            let prefix = cast
                .get(..usize::try_from(len).unwrap_or(usize::MAX))
                .unwrap_or(&cast);
            Screen::from_cast(prefix)
        }
        .await;
        let drawn = drawn?;
        unfinished.armed = false;
        let mut inner = self.lock();
        match std::mem::replace(&mut inner.screen, Keep::Off) {
            Keep::Building(n, mut since) if n == draw => {
                since.finish_building(drawn);
                let (to, rx) = mpsc::channel(PAINT_QUEUE);
                tokio::task::spawn_blocking(move || paint(since, rx));
                inner.screen = Keep::Painting {
                    to,
                    batch: Vec::new(),
                    gathered: 0,
                };
            }
            // Overtaken by a later draw, or given up: that one stands.
            other => inner.screen = other,
        }
        for seat in &inner.seats {
            seat.nudge.notify_one();
        }
        Ok(())
    }

    /// What seat `key` does after its nudge. Its queue must have been emptied first: from the
    /// frames returned on, it gets the live ones. The first watcher after a quiet spell is
    /// told to draw the screen (the cut is taken under the lock the relay's output goes
    /// through, so the recording's first `n` bytes and the output after them are exactly
    /// everything, once).
    pub fn catch_up(&self, key: u64, writer: &CastWriter) -> CatchUp {
        let mut inner = self.lock();
        let (reply, frames) = oneshot::channel();
        let asked = match &inner.screen {
            Keep::Building(..) => return CatchUp::Wait,
            Keep::Off => false,
            Keep::Painting { .. } => {
                inner.paint(Paint::Frames(reply));
                matches!(inner.screen, Keep::Painting { .. })
            }
        };
        if !asked {
            inner.draws += 1;
            inner.screen = Keep::Building(inner.draws, Screen::building());
            return CatchUp::Draw {
                len: writer.len(),
                draw: inner.draws,
            };
        }
        if let Some(seat) = inner.seats.iter_mut().find(|s| s.key == key) {
            seat.live = true;
        }
        CatchUp::Frames(frames)
    }

    fn leave(&self, key: u64) {
        let mut inner = self.lock();
        inner.seats.retain(|s| s.key != key);
        if inner.seats.is_empty() {
            // Nobody watches: the painter and the emulator's memory go with them.
            inner.screen = Keep::Off;
        }
        let audience = inner.audience();
        drop(inner);
        self.audience.send_replace(audience);
    }
}

/// A first screen's draw that has not finished: dropped so, it gives the draw up (the screen
/// goes back to off) and nudges every seated watcher, one of whom then draws it again.
struct Unfinished<'a> {
    hub: &'a Hub,
    draw: u64,
    armed: bool,
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut inner = self.hub.lock();
        if matches!(inner.screen, Keep::Building(n, _) if n == self.draw) {
            inner.screen = Keep::Off;
        }
        for seat in &inner.seats {
            seat.nudge.notify_one();
        }
    }
}

impl Inner {
    /// Hands output, a resize or a request for the screen to whatever keeps the screen: the
    /// one drawing it, or the painter (output is gathered, and handed over in batches and
    /// ahead of anything else); a painter too far behind is dropped, and every watcher draws
    /// the screen again (from the recording) rather than the relay waiting.
    fn paint(&mut self, work: Paint) {
        let dropped = match (&mut self.screen, work) {
            (Keep::Off, _) => false,
            (Keep::Building(_, s), work) => {
                match work {
                    Paint::Output(pieces) => pieces.into_iter().for_each(|p| s.output(p)),
                    Paint::Resize(cols, rows) => s.resize(cols, rows),
                    // Nobody asks a screen being drawn (`catch_up` says wait).
                    Paint::Frames(_) => {}
                }
                s.held() > HOLD_WHILE_DRAWING
            }
            (
                Keep::Painting {
                    to,
                    batch,
                    gathered,
                },
                work,
            ) => {
                let work = match work {
                    Paint::Output(mut pieces) => {
                        *gathered += pieces.iter().map(Bytes::len).sum::<usize>();
                        batch.append(&mut pieces);
                        None
                    }
                    other => Some(other),
                };
                let hand_over = work.is_some() || *gathered >= BATCH;
                let mut full = false;
                if hand_over && !batch.is_empty() {
                    full = to.try_send(Paint::Output(std::mem::take(batch))).is_err();
                    *gathered = 0;
                }
                if let Some(work) = work {
                    full = full || to.try_send(work).is_err();
                }
                full
            }
        };
        if dropped {
            self.screen = Keep::Off;
            for seat in &mut self.seats {
                seat.live = false;
                seat.nudge.notify_one();
            }
        }
    }

    fn fan_out(&mut self, frame: &Bytes) {
        for seat in self.seats.iter_mut().filter(|s| s.live) {
            if seat.queue.try_send(frame.clone()).is_err() {
                // Full (or its socket is going): skipped until it caught up.
                seat.live = false;
                seat.nudge.notify_one();
            }
        }
    }

    fn audience(&self) -> Audience {
        let mut names: Vec<String> = Vec::new();
        for seat in &self.seats {
            if !names.contains(&seat.name) {
                names.push(seat.name.clone());
            }
        }
        Audience {
            names,
            moderators: self.seats.iter().filter(|s| s.moderates).count(),
        }
    }
}
