//! When bytes reached the socket, not when perfgate got to read them (issue 47): the kernel's
//! receive timestamp of a TCP read (`SO_TIMESTAMPNS`), as an [`Instant`].
//!
//! A client or simulator whose thread is busy reads a ready socket late; stamping the read with
//! the time it returned puts that delay into the measurement (at 1,024 streams on one core, a
//! thousand reads fall due in the same few milliseconds). The kernel stamps each received
//! segment as it arrives; a read reports the stamp of the last segment it consumed, so a read of
//! one event carries that event's arrival however late the read ran. A read of several events
//! carries the last one's: never later than the read's own time.
//!
//! Linux only; elsewhere, or when the socket refuses the option, reads carry no stamp and the
//! callers use the read's time as before.
//!
//! `unsafe`: `setsockopt`, `recvmsg` and the control-message walk, which neither std nor tokio
//! expose; and the view of an initialised byte buffer as a `MaybeUninit` one.
#![allow(unsafe_code)]

use std::io;
use std::mem::MaybeUninit;
use std::task::{ready, Context, Poll};
use std::time::{Instant, SystemTime};
use tokio::io::Interest;
use tokio::net::TcpStream;

/// Asks the kernel to stamp what `s` receives; whether it will.
pub fn enable(s: &TcpStream) -> bool {
    imp::enable(s)
}

/// One read of `s` into `buf` when it is readable: the bytes read (0: the peer closed) and the
/// kernel's receive time of the last of them, when it stamped them: never later than this
/// call's return.
///
/// A read that did not fill `buf` drained the socket, so its readiness is cleared and the next
/// call waits for the next segment without a second `recvmsg` (as tokio's own `poll_read`).
pub fn poll_recv(
    s: &TcpStream,
    cx: &mut Context<'_>,
    buf: &mut [MaybeUninit<u8>],
) -> Poll<io::Result<(usize, Option<Instant>)>> {
    loop {
        ready!(s.poll_read_ready(cx))?;
        let mut got = None;
        let r = s.try_io(Interest::READABLE, || {
            let (n, stamp) = imp::recv(s, buf)?;
            if n > 0 && n < buf.len() {
                // drained: report the bytes, and let tokio clear the readiness it saw
                got = Some((n, stamp));
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok((n, stamp))
        });
        match (r, got) {
            (_, Some((n, stamp))) | (Ok((n, stamp)), None) => {
                return Poll::Ready(Ok((n, stamp.and_then(instant_of))))
            }
            (Err(e), None) if e.kind() == io::ErrorKind::WouldBlock => continue,
            (Err(e), None) => return Poll::Ready(Err(e)),
        }
    }
}

/// [`poll_recv`] as a future, into an initialised buffer.
pub async fn recv(s: &TcpStream, buf: &mut [u8]) -> io::Result<(usize, Option<Instant>)> {
    // SAFETY: `[u8]` and `[MaybeUninit<u8>]` have the same layout, and the read only writes
    // initialised bytes into a buffer that is already initialised.
    let buf = unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) };
    std::future::poll_fn(|cx| poll_recv(s, cx, buf)).await
}

/// A wall-clock stamp as an [`Instant`]: now, less how long ago the stamp was. `None` when the
/// stamp is in the future (the wall clock stepped back since).
fn instant_of(stamp: SystemTime) -> Option<Instant> {
    let (wall, mono) = (SystemTime::now(), Instant::now());
    mono.checked_sub(wall.duration_since(stamp).ok()?)
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::mem::{size_of, MaybeUninit};
    use std::os::fd::AsRawFd;
    use std::time::{Duration, SystemTime};
    use tokio::net::TcpStream;

    pub fn enable(s: &TcpStream) -> bool {
        let on: libc::c_int = 1;
        // SAFETY: a valid socket and a c_int option value of the size given.
        let r = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        r == 0
    }

    /// One non-blocking `recvmsg`: the bytes read and the `SCM_TIMESTAMPNS` stamp, if any.
    pub fn recv(
        s: &TcpStream,
        buf: &mut [MaybeUninit<u8>],
    ) -> io::Result<(usize, Option<SystemTime>)> {
        // room for one cmsg of a timespec (and a spare one), aligned as cmsghdr
        let mut control = [0u64; 16];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: zero is a valid msghdr; the pointers set below outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = size_of::<[u64; 16]>() as _;
        // SAFETY: a valid socket; msg points at a buffer and control space of the sizes given.
        let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut stamp = None;
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            return Ok((n as usize, None));
        }
        // SAFETY: the CMSG_* walk stays within msg_controllen, which the kernel set; a
        // timespec is read only from a message long enough to hold one.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let len = libc::CMSG_LEN(size_of::<libc::timespec>() as u32) as usize;
                if (*c).cmsg_level == libc::SOL_SOCKET
                    && (*c).cmsg_type == libc::SCM_TIMESTAMPNS
                    && (*c).cmsg_len as usize >= len
                {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    if ts.tv_sec > 0 {
                        stamp = SystemTime::UNIX_EPOCH.checked_add(Duration::new(
                            ts.tv_sec as u64,
                            ts.tv_nsec.clamp(0, 999_999_999) as u32,
                        ));
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        Ok((n as usize, stamp))
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;
    use std::mem::MaybeUninit;
    use std::time::SystemTime;
    use tokio::net::TcpStream;

    pub fn enable(_: &TcpStream) -> bool {
        false
    }

    pub fn recv(
        s: &TcpStream,
        buf: &mut [MaybeUninit<u8>],
    ) -> io::Result<(usize, Option<SystemTime>)> {
        // SAFETY: try_read only writes initialised bytes; the bytes it reports are initialised.
        let buf = unsafe { &mut *(buf as *mut [MaybeUninit<u8>] as *mut [u8]) };
        s.try_read(buf).map(|n| (n, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A read that runs late carries the time the bytes arrived, not the time it ran.
    #[tokio::test]
    async fn a_late_read_carries_the_arrival() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (client, server) = tokio::join!(TcpStream::connect(addr), l.accept());
        let (client, (mut server, _)) = (client.unwrap(), server.unwrap());
        let stamped = enable(&client);
        let before = Instant::now();
        server.write_all(b"first").await.unwrap();
        std::thread::sleep(std::time::Duration::from_millis(60));
        let mut buf = [0u8; 64];
        let (n, at) = recv(&client, &mut buf).await.unwrap();
        let read = Instant::now();
        assert_eq!(&buf[..n], b"first");
        if cfg!(target_os = "linux") {
            assert!(stamped);
            let at = at.expect("a stamp");
            // not before the write, and long before the read returned (under load the kernel
            // may stamp a loopback segment a little after the write, not 40 ms after)
            assert!(at >= before, "{at:?} {before:?}");
            assert!(read.duration_since(at) >= std::time::Duration::from_millis(40));
        }
        drop(server);
        let (n, _) = recv(&client, &mut buf).await.unwrap();
        assert_eq!(n, 0);
    }
}
