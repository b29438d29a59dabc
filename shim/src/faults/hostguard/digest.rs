//! The host-write guard's reads of a copy's source: a digest (one xxh3 hash per chunk that
//! `seedance_core::hostguard::sample_plan` names) and the snapshot's copy. Every read goes
//! through `process_vm_readv` on the shim's own process: memory unmapped meanwhile (a
//! buffer freed behind the shim's back) makes the read fail with `EFAULT` instead of
//! faulting, and the program's memory protection and signals are never involved.

use seedance_core::hostguard::sample_plan;
use xxhash_rust::xxh3::xxh3_64;

/// The hashes of a source's sampled chunks: (offset in the copy, length, hash).
pub(super) struct Digest {
    chunks: Vec<(u64, u64, u64)>,
}

/// Most iovecs per `process_vm_readv` (`UIO_MAXIOV` is 1024 on Linux).
const IOVS: usize = 64;

/// Reads `len` bytes at `addr` of this process into `dst`; `false` on any failure.
pub(super) fn read(addr: u64, dst: *mut u8, len: usize) -> bool {
    let mut done = 0usize;
    while done < len {
        let local = libc::iovec {
            // SAFETY: dst is valid for len bytes (the caller's buffer); done < len.
            iov_base: unsafe { dst.add(done) }.cast(),
            iov_len: len - done,
        };
        let remote = libc::iovec {
            iov_base: (addr as usize + done) as *mut libc::c_void,
            iov_len: len - done,
        };
        // SAFETY: one local iovec inside the caller's buffer; the remote one is only
        // read by the kernel, which checks it (EFAULT for memory that is not mapped).
        let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        if n <= 0 {
            return false;
        }
        done += n as usize;
    }
    true
}

/// Hashes of the chunks `plan` names of the bytes at `addr`, `None` if a read failed.
fn hashes(addr: u64, plan: &[(u64, u64)]) -> Option<Vec<u64>> {
    let total: u64 = plan.iter().map(|c| c.1).sum();
    let mut buf = vec![0u8; total as usize];
    let mut at = 0usize;
    for group in plan.chunks(IOVS) {
        let start = at;
        let mut local = Vec::with_capacity(group.len());
        let mut remote = Vec::with_capacity(group.len());
        for &(off, len) in group {
            local.push(libc::iovec {
                // SAFETY: at + len <= total: the chunks' lengths sum to buf's length.
                iov_base: unsafe { buf.as_mut_ptr().add(at) }.cast(),
                iov_len: len as usize,
            });
            remote.push(libc::iovec {
                iov_base: (addr + off) as usize as *mut libc::c_void,
                iov_len: len as usize,
            });
            at += len as usize;
        }
        // SAFETY: the local iovecs lie inside buf; the remote ones are only read by the
        // kernel, which checks them.
        let n = unsafe {
            libc::process_vm_readv(
                libc::getpid(),
                local.as_ptr(),
                local.len() as libc::c_ulong,
                remote.as_ptr(),
                remote.len() as libc::c_ulong,
                0,
            )
        };
        if n < 0 || n as usize != at - start {
            return None;
        }
    }
    let mut out = Vec::with_capacity(plan.len());
    let mut at = 0usize;
    for &(_, len) in plan {
        out.push(xxh3_64(&buf[at..at + len as usize]));
        at += len as usize;
    }
    Some(out)
}

/// The digest of the `bytes`-byte source at `addr`; `None` if it cannot be read.
pub(super) fn take(addr: u64, bytes: u64) -> Option<Digest> {
    let plan = sample_plan(bytes);
    let h = hashes(addr, &plan)?;
    Some(Digest {
        chunks: plan
            .into_iter()
            .zip(h)
            .map(|((o, l), h)| (o, l, h))
            .collect(),
    })
}

/// The first chunk (offset in the copy, length) whose bytes at `addr` differ from `d`:
/// `Some(None)` when none does, `None` when the source cannot be read any more.
pub(super) fn first_difference(addr: u64, d: &Digest) -> Option<Option<(u64, u64)>> {
    let plan: Vec<(u64, u64)> = d.chunks.iter().map(|&(o, l, _)| (o, l)).collect();
    let now = hashes(addr, &plan)?;
    Some(
        d.chunks
            .iter()
            .zip(now)
            .find(|((_, _, was), now)| *was != *now)
            .map(|(&(o, l, _), _)| (o, l)),
    )
}
