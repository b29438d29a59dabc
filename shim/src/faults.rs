//! Fault handling per kind of mistake: each module gathers facts from the driver, asks
//! seedance-core what they mean, and acts (reports, repairs, counts).

pub mod alloc;
pub mod capture;
pub mod devices;
pub mod forked;
pub mod hazard;
#[cfg(target_os = "linux")]
pub mod hostguard;
#[cfg(not(target_os = "linux"))]
#[path = "faults/hostguard_other.rs"]
pub mod hostguard;
pub mod launch;
pub mod lifetime;

#[cfg(test)]
mod tests {
    /// The words the fault modules read on every call are the ones on the shared line
    /// pair (`crate::rt::hot`).
    #[test]
    fn the_hot_words_every_module_reads_share_one_line_pair() {
        let base = crate::rt::hot::hot() as *const _ as usize;
        assert_eq!(base % 128, 0);
        for (name, p) in [
            (
                "configuration word",
                crate::rt::config::word() as *const _ as usize,
            ),
            (
                "dead handles",
                super::lifetime::dead_handles() as *const _ as usize,
            ),
            (
                "open captures",
                super::capture::captures_open() as *const _ as usize,
            ),
            ("box low", super::hazard::box_lo() as *const _ as usize),
            ("box high", super::hazard::box_hi() as *const _ as usize),
        ] {
            assert!(
                p >= base && p - base < 128,
                "{name} at {p:#x}, line pair at {base:#x}"
            );
        }
    }
}
