//! A TCP ring: the collective of CPU workers in several processes or machines, as XGBoost's
//! and LightGBM's CPU workers have. Worker `r` sends to worker `r + 1` and receives from
//! worker `r - 1` (mod the world); sums and maxima run as a reduce-scatter then an
//! all-gather around the ring, so each worker sends about twice its buffer whatever the
//! world size.
//!
//! Start-up: each worker listens on a port of its own choosing, then registers with a
//! tracker (a rendezvous that [`serve_tracker`] runs, in the Dask client) that answers
//! with every worker's address once all have registered. Every connection opens with the
//! job's token, so a stray connection (another job, a port scanner) is refused. Every
//! operation has a deadline; a worker that dies closes its sockets and its neighbours fail
//! at once, naming it, and the ring then refuses further operations.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{pack, unpack, Collective};
use crate::error::{Error, Result};

const MAGIC: &[u8] = b"polars-gbt ring 1";

/// How a worker joins a ring.
#[derive(Clone, Debug)]
pub struct RingConfig {
    pub rank: usize,
    pub world: usize,
    /// The tracker's `host:port`.
    pub tracker: String,
    /// The job's token: connections that do not carry it are refused.
    pub token: String,
    /// The host name or address the other workers reach this one at.
    pub host: String,
    /// The deadline of start-up and of every operation.
    pub timeout: Duration,
}

/// The connections of one worker in the ring.
struct Links {
    next: TcpStream,
    prev: TcpStream,
}

/// A worker's place in a TCP ring.
pub struct TcpRing {
    rank: usize,
    world: usize,
    /// Every worker's address, by rank (for messages that name a worker).
    addresses: Vec<String>,
    timeout: Duration,
    /// None once an operation failed: the ring is broken for good.
    links: Mutex<Option<Links>>,
    /// Time spent in operations (ns) and bytes sent, for benchmarks.
    busy_ns: AtomicU64,
    sent: AtomicU64,
}

impl TcpRing {
    /// Joins the ring that `cfg` describes: listens, registers with the tracker, then connects
    /// to the next worker and accepts the previous one.
    pub fn join(cfg: &RingConfig) -> Result<TcpRing> {
        if cfg.world == 0 || cfg.rank >= cfg.world {
            return Err(Error::Collective(format!("rank {} is outside a world of {}", cfg.rank, cfg.world)));
        }
        let deadline = Instant::now() + cfg.timeout;
        let listener = TcpListener::bind((cfg.host.as_str(), 0))
            .or_else(|_| TcpListener::bind(("0.0.0.0", 0)))
            .map_err(|e| Error::Collective(format!("rank {} cannot listen on {}: {e}", cfg.rank, cfg.host)))?;
        let port = listener.local_addr()?.port();
        let me = format!("{}:{port}", cfg.host);
        let addresses = register(cfg, &me, deadline)?;
        let ring = |links| TcpRing {
            rank: cfg.rank,
            world: cfg.world,
            addresses: addresses.clone(),
            timeout: cfg.timeout,
            links: Mutex::new(links),
            busy_ns: AtomicU64::new(0),
            sent: AtomicU64::new(0),
        };
        if cfg.world == 1 {
            return Ok(ring(None));
        }
        let next_rank = (cfg.rank + 1) % cfg.world;
        let prev_rank = (cfg.rank + cfg.world - 1) % cfg.world;
        // Connect and greet first, accept second, read the greeting's answer last: every
        // worker does the same, and greetings fit in the sockets' buffers, so none waits on
        // another in a cycle.
        let mut next = connect(&addresses[next_rank], deadline).map_err(|e| {
            Error::Collective(format!(
                "rank {} cannot reach rank {next_rank} at {}: {e}",
                cfg.rank, addresses[next_rank]
            ))
        })?;
        next.set_nodelay(true)?;
        write_message(&mut next, &pack(&[MAGIC, cfg.token.as_bytes(), &(cfg.rank as u64).to_le_bytes()]), deadline)?;
        let prev = accept_peer(&listener, cfg, prev_rank, deadline)?;
        prev.set_nodelay(true)?;
        let mut ack = [0u8; 1];
        set_deadline(&next, deadline)?;
        next.read_exact(&mut ack).map_err(|e| {
            Error::Collective(format!(
                "rank {} was not accepted by rank {next_rank} at {}: {e}",
                cfg.rank, addresses[next_rank]
            ))
        })?;
        Ok(ring(Some(Links { next, prev })))
    }

    /// Seconds this worker has spent in operations (waiting for the others included), and
    /// the bytes it has sent: what a benchmark reports as the collective's share.
    pub fn usage(&self) -> (f64, u64) {
        (self.busy_ns.load(Ordering::Relaxed) as f64 * 1e-9, self.sent.load(Ordering::Relaxed))
    }

    fn next_rank(&self) -> usize {
        (self.rank + 1) % self.world
    }

    fn prev_rank(&self) -> usize {
        (self.rank + self.world - 1) % self.world
    }

    /// Runs `op` on the links; an error breaks the ring (its sockets close, so the other
    /// workers fail at once rather than at their deadlines).
    fn with_links<T>(&self, op: impl FnOnce(&mut Links, Instant) -> Result<T>) -> Result<T> {
        let mut guard = self.links.lock().unwrap_or_else(|p| p.into_inner());
        let Some(links) = guard.as_mut() else {
            return Err(Error::Collective(format!("rank {}: the ring broke in an earlier operation", self.rank)));
        };
        let start = Instant::now();
        let out = op(links, start + self.timeout);
        self.busy_ns.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        if out.is_err() {
            if let Some(l) = guard.take() {
                let _ = l.next.shutdown(Shutdown::Both);
                let _ = l.prev.shutdown(Shutdown::Both);
            }
        }
        out
    }

    /// Sends `out` to the next worker while receiving the previous worker's message.
    fn step(&self, links: &mut Links, out: &[u8], deadline: Instant) -> Result<Vec<u8>> {
        self.sent.fetch_add(out.len() as u64 + 8, Ordering::Relaxed);
        let Links { next, prev } = links;
        let (sent, received) = std::thread::scope(|s| {
            let sender = s.spawn(|| write_message(next, out, deadline));
            let received = read_message(prev, deadline);
            (sender.join().unwrap_or_else(|_| Err(Error::Collective("a send thread panicked".into()))), received)
        });
        sent.map_err(|e| self.peer_error(self.next_rank(), "sending to", e))?;
        received.map_err(|e| self.peer_error(self.prev_rank(), "receiving from", e))
    }

    fn peer_error(&self, peer: usize, what: &str, e: Error) -> Error {
        let reason = match e {
            Error::Io(io) if matches!(io.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                format!("no progress within the timeout of {:.0} s", self.timeout.as_secs_f64())
            }
            Error::Io(io) if io.kind() == ErrorKind::UnexpectedEof => {
                "the connection closed (the worker stopped)".into()
            }
            e => e.to_string(),
        };
        Error::Collective(format!("rank {} failed {what} rank {peer} at {}: {reason}", self.rank, self.addresses[peer]))
    }

    /// A reduce-scatter then an all-gather around the ring, combining with `combine`.
    fn all_reduce(&self, values: &mut [i64], combine: fn(i64, i64) -> i64) -> Result<()> {
        if self.world == 1 || values.is_empty() {
            return Ok(());
        }
        let (w, r, n) = (self.world, self.rank, values.len());
        let chunk = |i: usize| (i * n / w)..((i + 1) * n / w);
        self.with_links(|links, deadline| {
            for s in 0..w - 1 {
                let (send, recv) = (chunk((r + w - s) % w), chunk((r + 2 * w - s - 1) % w));
                let got = self.step(links, &to_bytes(&values[send]), deadline)?;
                let got = from_bytes(&got, recv.len())?;
                values[recv].iter_mut().zip(got).for_each(|(v, g)| *v = combine(*v, g));
            }
            for s in 0..w - 1 {
                let (send, recv) = (chunk((r + 1 + w - s) % w), chunk((r + w - s) % w));
                let got = self.step(links, &to_bytes(&values[send]), deadline)?;
                values[recv.clone()].copy_from_slice(&from_bytes(&got, recv.len())?);
            }
            Ok(())
        })
    }
}

impl Collective for TcpRing {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> usize {
        self.world
    }

    fn all_reduce_sum(&self, values: &mut [i64]) -> Result<()> {
        self.all_reduce(values, i64::wrapping_add)
    }

    fn all_reduce_max(&self, values: &mut [i64]) -> Result<()> {
        self.all_reduce(values, i64::max)
    }

    fn all_gather(&self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let (w, r) = (self.world, self.rank);
        let mut blocks = vec![Vec::new(); w];
        blocks[r] = mine.to_vec();
        if w == 1 {
            return Ok(blocks);
        }
        self.with_links(|links, deadline| {
            for s in 0..w - 1 {
                let send = std::mem::take(&mut blocks[(r + w - s) % w]);
                let got = self.step(links, &send, deadline)?;
                blocks[(r + w - s) % w] = send;
                blocks[(r + 2 * w - s - 1) % w] = got;
            }
            Ok(())
        })?;
        Ok(blocks)
    }

    fn broadcast(&self, mine: &[u8], root: usize) -> Result<Vec<u8>> {
        if root >= self.world {
            return Err(Error::Collective(format!("broadcast from rank {root} in a world of {}", self.world)));
        }
        if self.world == 1 {
            return Ok(mine.to_vec());
        }
        self.with_links(|links, deadline| {
            // The root's bytes travel once around the ring, stopping before the root.
            let bytes = if self.rank == root {
                mine.to_vec()
            } else {
                read_message(&mut links.prev, deadline)
                    .map_err(|e| self.peer_error(self.prev_rank(), "receiving from", e))?
            };
            if self.next_rank() != root {
                self.sent.fetch_add(bytes.len() as u64 + 8, Ordering::Relaxed);
                write_message(&mut links.next, &bytes, deadline)
                    .map_err(|e| self.peer_error(self.next_rank(), "sending to", e))?;
            }
            Ok(bytes)
        })
    }
}

/// Registers with the tracker and returns every worker's address, by rank.
fn register(cfg: &RingConfig, me: &str, deadline: Instant) -> Result<Vec<String>> {
    let unreachable = |e: std::io::Error| {
        Error::Collective(format!("rank {} cannot reach the tracker at {}: {e}", cfg.rank, cfg.tracker))
    };
    let mut tracker = connect(&cfg.tracker, deadline).map_err(unreachable)?;
    let hello = pack(&[
        MAGIC,
        cfg.token.as_bytes(),
        &(cfg.rank as u64).to_le_bytes(),
        &(cfg.world as u64).to_le_bytes(),
        me.as_bytes(),
    ]);
    write_message(&mut tracker, &hello, deadline)?;
    let answer = read_message(&mut tracker, deadline).map_err(|e| {
        Error::Collective(format!(
            "rank {} got no answer from the tracker at {} (the other workers did not all register in time?): {e}",
            cfg.rank, cfg.tracker
        ))
    })?;
    let addresses: Vec<String> =
        unpack(&answer)?.into_iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    if addresses.len() != cfg.world {
        return Err(Error::Collective(format!(
            "the tracker answered with {} workers, not {}",
            addresses.len(),
            cfg.world
        )));
    }
    Ok(addresses)
}

/// Runs the rendezvous of one ring of `world` workers on `listener`: collects each worker's
/// address, then tells every worker all of them. Connections without `token`, or for
/// another world size, are refused. Returns once every worker has its answer, or with an
/// error at `timeout`.
pub fn serve_tracker(listener: TcpListener, world: usize, token: &str, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let mut workers: Vec<Option<(TcpStream, String)>> = (0..world).map(|_| None).collect();
    while workers.iter().any(Option::is_none) {
        let Some((stream, hello)) = next_greeting(&listener, deadline)? else {
            let missing: Vec<usize> = (0..world).filter(|&r| workers[r].is_none()).collect();
            return Err(Error::Collective(format!(
                "the tracker timed out after {:.0} s waiting for ranks {missing:?} to register",
                timeout.as_secs_f64()
            )));
        };
        let Ok(parts) = unpack(&hello) else { continue };
        if parts.len() != 5 || parts[0] != MAGIC || parts[1] != token.as_bytes() {
            continue;
        }
        let (Ok(rank), Ok(n)) = (le_u64(parts[2]), le_u64(parts[3])) else { continue };
        if n as usize != world || rank as usize >= world {
            continue;
        }
        // A worker that registers again (a retried task) replaces its first registration.
        workers[rank as usize] = Some((stream, String::from_utf8_lossy(parts[4]).into_owned()));
    }
    let addresses: Vec<&[u8]> = workers.iter().map(|w| w.as_ref().unwrap().1.as_bytes()).collect();
    let answer = pack(&addresses);
    for (stream, _) in workers.iter_mut().flatten() {
        write_message(stream, &answer, deadline)?;
    }
    Ok(())
}

/// Accepts the previous worker's connection, refusing any other.
fn accept_peer(listener: &TcpListener, cfg: &RingConfig, prev: usize, deadline: Instant) -> Result<TcpStream> {
    loop {
        let Some((mut stream, hello)) = next_greeting(listener, deadline)? else {
            return Err(Error::Collective(format!("rank {} timed out waiting for rank {prev} to connect", cfg.rank)));
        };
        let ok = unpack(&hello).is_ok_and(|p| {
            p.len() == 3 && p[0] == MAGIC && p[1] == cfg.token.as_bytes() && le_u64(p[2]) == Ok(prev as u64)
        });
        if ok {
            set_deadline(&stream, deadline)?;
            stream.write_all(&[1])?;
            return Ok(stream);
        }
    }
}

/// The next connection on `listener` with its greeting, or None once `deadline` passes. A
/// connection whose greeting does not arrive whole within 5 s is a stray one: dropped.
fn next_greeting(listener: &TcpListener, deadline: Instant) -> Result<Option<(TcpStream, Vec<u8>)>> {
    listener.set_nonblocking(true)?;
    loop {
        match listener.accept() {
            Ok((mut stream, _)) => {
                stream.set_nonblocking(false)?;
                if let Ok(hello) = read_message(&mut stream, (Instant::now() + Duration::from_secs(5)).min(deadline)) {
                    return Ok(Some((stream, hello)));
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Connects to `address`, retrying until `deadline` (the peer may not listen yet).
fn connect(address: &str, deadline: Instant) -> std::io::Result<TcpStream> {
    loop {
        let attempt = address.to_socket_addrs().and_then(|mut addrs| {
            let a = addrs.next().ok_or_else(|| std::io::Error::new(ErrorKind::NotFound, "no address"))?;
            let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
            TcpStream::connect_timeout(&a, left)
        });
        match attempt {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

fn set_deadline(stream: &TcpStream, deadline: Instant) -> Result<()> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(Error::Io(std::io::Error::new(ErrorKind::TimedOut, "deadline passed")));
    }
    stream.set_read_timeout(Some(left))?;
    stream.set_write_timeout(Some(left))?;
    Ok(())
}

fn write_message(stream: &mut TcpStream, bytes: &[u8], deadline: Instant) -> Result<()> {
    set_deadline(stream, deadline)?;
    stream.write_all(&(bytes.len() as u64).to_le_bytes())?;
    stream.write_all(bytes)?;
    Ok(())
}

/// Reads one length-prefixed message. The timeout is renewed per read, and a read that
/// times out is retried until `deadline` passes.
fn read_message(stream: &mut TcpStream, deadline: Instant) -> Result<Vec<u8>> {
    let mut len = [0u8; 8];
    read_full(stream, &mut len, deadline)?;
    let len = u64::from_le_bytes(len) as usize;
    if len > 1 << 40 {
        return Err(Error::Collective(format!("a worker announced a message of {len} bytes")));
    }
    let mut buf = vec![0u8; len];
    read_full(stream, &mut buf, deadline)?;
    Ok(buf)
}

fn read_full(stream: &mut TcpStream, mut buf: &mut [u8], deadline: Instant) -> Result<()> {
    while !buf.is_empty() {
        set_deadline(stream, deadline)?;
        match stream.read(buf) {
            Ok(0) => return Err(Error::Io(std::io::Error::new(ErrorKind::UnexpectedEof, "connection closed"))),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if Instant::now() >= deadline {
                    return Err(e.into());
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

fn le_u64(b: &[u8]) -> std::result::Result<u64, ()> {
    Ok(u64::from_le_bytes(b.try_into().map_err(|_| ())?))
}

fn to_bytes(values: &[i64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

fn from_bytes(bytes: &[u8], n: usize) -> Result<Vec<i64>> {
    if bytes.len() != n * 8 {
        return Err(Error::Collective(format!("expected {n} numbers from a worker, got {} bytes", bytes.len())));
    }
    Ok(bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect())
}
