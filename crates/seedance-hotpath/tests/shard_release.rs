//! A thread's shards are handed back when it exits, and the next thread takes them over
//! (`seedance_hotpath::thread`: the state has no destructor of its own; a separate
//! thread-local's hands the shards back). Its own process: no other test takes the freed
//! shard first.

use seedance_hotpath::work;

/// The shard id a new thread gets after counting one launch.
fn shard_of_new_thread() -> u32 {
    std::thread::spawn(|| {
        work::note_launch(0, false);
        work::own_shard_id().expect("a shard after a launch")
    })
    .join()
    .unwrap()
}

#[test]
fn an_exited_threads_shard_is_taken_by_the_next_thread() {
    let first = shard_of_new_thread();
    let before = work::shards().len();
    for _ in 0..20 {
        assert_eq!(shard_of_new_thread(), first);
    }
    assert_eq!(
        work::shards().len(),
        before,
        "no shard made for threads that come and go"
    );
}
