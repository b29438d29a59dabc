//! A driver call that failed in a child `fork()`ed after CUDA was initialised: the
//! explanation the child prints once (docs/design.md, fact 15: in such a child every driver
//! call returns `CUDA_ERROR_NOT_INITIALIZED` (3), `cuInit` included).

/// Where a forked child comes from: its own pid, the pid it was forked from, and the pid
/// whose `cuInit` succeeded before the fork (the parent itself, or an ancestor whose
/// initialised state the parent had inherited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lineage {
    /// This process.
    pub child: u32,
    /// The process it was forked from.
    pub parent: u32,
    /// The process whose `cuInit` succeeded before the fork.
    pub initialised_by: u32,
}

/// The text after `<function>: CUDA_ERROR_NOT_INITIALIZED (3): `: the cause (the fork after
/// initialisation, with the pids) and the fix (start workers with spawn or forkserver, or
/// initialise CUDA only in the children).
pub fn explanation(l: Lineage) -> String {
    let after = if l.initialised_by == l.parent {
        format!("after pid {} initialised CUDA", l.parent)
    } else {
        format!(
            "after pid {} had initialised CUDA (pid {} inherited that state)",
            l.initialised_by, l.parent
        )
    };
    format!(
        "this process (pid {}) was forked from pid {} {after}; the driver cannot be used in \
         a child forked after initialisation (every call returns this error, cuInit \
         included): start worker processes with the spawn or forkserver method \
         (multiprocessing.set_start_method(\"spawn\"), torch.multiprocessing, \
         DataLoader(multiprocessing_context=\"spawn\")), or initialise CUDA only in the \
         children, after the fork",
        l.child, l.parent
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_pids_the_cause_and_the_fix() {
        let text = explanation(Lineage {
            child: 12,
            parent: 10,
            initialised_by: 10,
        });
        assert!(text.starts_with(
            "this process (pid 12) was forked from pid 10 after pid 10 initialised CUDA; "
        ));
        assert!(text.contains("multiprocessing.set_start_method(\"spawn\")"));
        assert!(text.contains("initialise CUDA only in the children"));
    }

    #[test]
    fn a_grandchild_names_the_process_that_initialised() {
        let text = explanation(Lineage {
            child: 13,
            parent: 12,
            initialised_by: 10,
        });
        assert!(text.starts_with(
            "this process (pid 13) was forked from pid 12 after pid 10 had initialised CUDA \
             (pid 12 inherited that state); "
        ));
    }
}
