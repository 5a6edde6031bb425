//! How many connections the server holds, counted from the moment one is accepted, before it
//! has sent a byte: a client that opens sockets and says nothing, or stops inside a request's
//! head, holds one each, and enough of them take every file descriptor the server may open.
//! So the open connections are bounded in all (`[limits] connections`) and per client address
//! (`connections_per_address`; an IPv6 client by its /64, which one host can fill alone), and
//! past either bound a new one is closed as soon as it is accepted, before any parsing, while
//! those already open (terminals among them) go on. The trusted proxies are counted in all
//! only: every user behind them shares their addresses.
//!
//! A connection counts until its socket closes, after a WebSocket upgrade too: the count rides
//! on the socket ([`Counted`]), not on the HTTP connection that handed it over.
//!
//! Before HTTP starts, a connection must say which HTTP it speaks within the request timeout
//! ([`opening`]): the listener tells HTTP/2's preface from HTTP/1 by the first bytes and waits
//! for them with no timer of its own, so a client that sends nothing, or stops inside the
//! preface, would hold its connection for good.

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use ipnet::IpNet;
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, ReadBuf};

/// The bounds and what is open now.
#[derive(Debug, Clone)]
pub struct SocketBudget {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    total: usize,
    per_address: usize,
    exempt: Vec<IpNet>,
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
}

/// One admitted connection's place in the budget, given back when dropped.
#[derive(Debug)]
pub struct Ticket {
    inner: Arc<Inner>,
    address: Option<IpAddr>,
}

impl SocketBudget {
    /// At most `total` connections, `per_address` from one client address outside `exempt`.
    pub fn new(total: usize, per_address: usize, exempt: Vec<IpNet>) -> SocketBudget {
        SocketBudget {
            inner: Arc::new(Inner {
                total,
                per_address,
                exempt,
                open: Mutex::default(),
            }),
        }
    }

    /// A place for a connection from `peer`, or `None` when a bound is reached.
    pub fn admit(&self, peer: IpAddr) -> Option<Ticket> {
        let address = (!self.inner.exempt.iter().any(|n| n.contains(&peer))).then(|| group(peer));
        let mut open = self
            .inner
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if open.total >= self.inner.total {
            return None;
        }
        if let Some(a) = address {
            let n = open.by_address.entry(a).or_insert(0);
            if *n >= self.inner.per_address {
                return None;
            }
            *n += 1;
        }
        open.total += 1;
        Some(Ticket {
            inner: self.inner.clone(),
            address,
        })
    }
}

/// The address a client is counted under: itself, or its /64 for IPv6.
fn group(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut open = self
            .inner
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        open.total = open.total.saturating_sub(1);
        if let Some(a) = self.address {
            if let Some(n) = open.by_address.get_mut(&a) {
                *n -= 1;
                if *n == 0 {
                    open.by_address.remove(&a);
                }
            }
        }
    }
}

/// A socket holding its [`Ticket`] for as long as it is open, and the first bytes that
/// [`opening`] read ahead, read again first.
#[derive(Debug)]
pub struct Counted<IO> {
    io: IO,
    _ticket: Ticket,
    prefix: Vec<u8>,
    at: usize,
}

impl<IO> Counted<IO> {
    /// `io`, counted by `ticket`.
    pub fn new(io: IO, ticket: Ticket) -> Counted<IO> {
        Counted {
            io,
            _ticket: ticket,
            prefix: Vec::new(),
            at: 0,
        }
    }
}

impl<IO> Counted<IO> {
    /// Whether [`opening`] read HTTP/2's preface: the connection speaks HTTP/2.
    pub fn is_http2(&self) -> bool {
        self.prefix == H2_PREFACE
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Counted<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.at < self.prefix.len() {
            let n = (self.prefix.len() - self.at).min(buf.remaining());
            let at = self.at;
            buf.put_slice(&self.prefix[at..at + n]);
            self.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Counted<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// HTTP/2's connection preface (RFC 9113, 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Reads the first bytes of `socket`, within `within`, until they tell HTTP/2's preface from
/// anything else: the socket with them put back, or `None` when it said nothing decisive in
/// time, or closed.
pub async fn opening<IO: AsyncRead + Unpin>(
    mut socket: Counted<IO>,
    within: Duration,
) -> Option<Counted<IO>> {
    let mut seen = Vec::with_capacity(H2_PREFACE.len());
    let read = async {
        while seen.len() < H2_PREFACE.len() && H2_PREFACE.starts_with(&seen) {
            let mut chunk = [0u8; 24];
            let want = H2_PREFACE.len() - seen.len();
            let n = socket.io.read(&mut chunk[..want]).await.ok()?;
            if n == 0 {
                return None;
            }
            seen.extend_from_slice(&chunk[..n]);
        }
        Some(())
    };
    tokio::time::timeout(within, read).await.ok().flatten()?;
    socket.prefix = seen;
    socket.at = 0;
    Some(socket)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn bounds_in_all_and_per_address_with_proxies_counted_in_all_only() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let b = SocketBudget::new(5, 2, vec!["10.0.0.0/24".parse().unwrap()]);
        let a1 = b.admit(ip("192.0.2.1")).unwrap();
        let _a2 = b.admit(ip("192.0.2.1")).unwrap();
        assert!(
            b.admit(ip("192.0.2.1")).is_none(),
            "a third from one address"
        );
        // One host's IPv6 /64 is one address.
        let _v1 = b.admit(ip("2001:db8::1")).unwrap();
        let _v2 = b.admit(ip("2001:db8::2")).unwrap();
        assert!(b.admit(ip("2001:db8::3")).is_none(), "a third from one /64");
        drop(a1);
        // Behind the proxy: any number from one address, within the total.
        let _p1 = b.admit(ip("10.0.0.9")).unwrap();
        let _p2 = b.admit(ip("10.0.0.9")).unwrap();
        assert!(b.admit(ip("10.0.0.9")).is_none(), "the total is reached");
        assert!(b.admit(ip("198.51.100.7")).is_none());
    }

    fn counted<IO>(io: IO) -> Counted<IO> {
        let ticket = SocketBudget::new(1, 1, vec![]).admit(IpAddr::from([192, 0, 2, 1]));
        Counted::new(io, ticket.unwrap())
    }

    #[tokio::test]
    async fn the_opening_is_read_ahead_and_read_again() {
        let short = Duration::from_millis(200);
        for sent in [&b"GET / HTTP/1.1\r\n\r\n"[..], b"PO", H2_PREFACE] {
            let (mut client, server) = tokio::io::duplex(64);
            tokio::io::AsyncWriteExt::write_all(&mut client, sent)
                .await
                .unwrap();
            let mut io = opening(counted(server), short).await.unwrap();
            let mut again = vec![0u8; sent.len()];
            io.read_exact(&mut again).await.unwrap();
            assert_eq!(again, sent);
        }
        // Nothing, or a preface cut short, within the time: no connection.
        for sent in [&b""[..], b"PRI * HTTP/2.0\r\n"] {
            let (mut client, server) = tokio::io::duplex(64);
            tokio::io::AsyncWriteExt::write_all(&mut client, sent)
                .await
                .unwrap();
            assert!(opening(counted(server), short).await.is_none(), "{sent:?}");
        }
    }

    #[test]
    fn a_place_comes_back_when_its_ticket_goes() {
        let b = SocketBudget::new(1, 1, vec![]);
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let t = b.admit(ip).unwrap();
        assert!(b.admit(ip).is_none());
        drop(t);
        assert!(b.admit(ip).is_some());
    }
}
