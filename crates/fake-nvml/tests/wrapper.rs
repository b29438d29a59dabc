//! The fake through the real `nvml-wrapper` crate (the one the product uses): proves the
//! symbols, ABIs and count protocols are what a real client expects.
#![warn(clippy::undocumented_unsafe_blocks)]

mod common;

use nvml_wrapper::enum_wrappers::device::ComputeMode;
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;

use common::{nvml_path, run_scenario, SCENARIO_ENV};

#[test]
fn child() {
    let Ok(scenario) = std::env::var(SCENARIO_ENV) else {
        return;
    };
    let path = nvml_path();
    match scenario.as_str() {
        "wrapper" => wrapper(&path),
        "wrapper_absent" => {
            let r = Nvml::builder().lib_path(path.as_os_str()).init();
            assert!(matches!(r, Err(NvmlError::DriverNotLoaded)), "{r:?}");
        }
        other => panic!("unknown scenario {other}"),
    }
}

fn wrapper(path: &std::path::Path) {
    let nvml = Nvml::builder()
        .lib_path(path.as_os_str())
        .init()
        .expect("init");
    assert_eq!(nvml.sys_driver_version().expect("driver"), "580.159.04");
    assert_eq!(nvml.sys_cuda_driver_version().expect("cuda"), 13000);
    assert_eq!(nvml.device_count().expect("count"), 3);

    let expect = [
        (
            "NVIDIA H200",
            "00000000:10:00.0",
            1000,
            ComputeMode::Default,
            0,
        ),
        (
            "Fake H200 #1",
            "00000000:11:00.0",
            2000,
            ComputeMode::ExclusiveProcess,
            1,
        ),
        (
            "Fake H200 #2",
            "00000000:12:00.0",
            3000,
            ComputeMode::Prohibited,
            0,
        ),
    ];
    for (i, (name, bus_id, free, mode, procs)) in expect.into_iter().enumerate() {
        let dev = nvml.device_by_index(i as u32).expect("device");
        assert_eq!(dev.index().expect("index"), i as u32);
        assert_eq!(dev.name().expect("name"), name);
        let uuid = dev.uuid().expect("uuid");
        assert_eq!(
            uuid,
            format!("GPU-face5eed-0000-4000-8000-0000000000{i:02x}")
        );
        let pci = dev.pci_info().expect("pci");
        assert_eq!(pci.bus_id, bus_id);
        assert_eq!((pci.domain, pci.bus, pci.device), (0, 0x10 + i as u32, 0));
        let mem = dev.memory_info().expect("memory");
        assert_eq!(
            (mem.total, mem.free, mem.used),
            (1 << 30, free, (1 << 30) - free)
        );
        assert_eq!(dev.compute_mode().expect("mode"), mode);
        let running = dev.running_compute_processes().expect("processes");
        assert_eq!(running.len(), procs);
        if let Some(p) = running.first() {
            assert_eq!(p.pid, 4242);
            assert_eq!(p.used_gpu_memory, UsedGpuMemory::Used(1 << 30));
            assert_eq!((p.gpu_instance_id, p.compute_instance_id), (None, None));
        }
        let cc = dev.cuda_compute_capability().expect("capability");
        assert_eq!((cc.major, cc.minor), (9, 0));

        let by_uuid = nvml.device_by_uuid(uuid.as_str()).expect("by uuid");
        assert_eq!(by_uuid.index().expect("index"), i as u32);
        let by_bus = nvml.device_by_pci_bus_id(bus_id).expect("by bus id");
        assert_eq!(by_bus.index().expect("index"), i as u32);
    }
    assert!(matches!(
        nvml.device_by_index(3),
        Err(NvmlError::InvalidArg)
    ));
    assert!(matches!(
        nvml.device_by_uuid("GPU-nope"),
        Err(NvmlError::NotFound)
    ));
    nvml.shutdown().expect("shutdown");
}

#[test]
fn nvml_wrapper_reads_the_fake() {
    run_scenario(
        "wrapper",
        &[
            ("FAKE_CUDA_DEVICE_COUNT", "3"),
            ("FAKE_CUDA_TOTAL_MEM", "1073741824"),
            ("FAKE_CUDA_FREE_MEM", "1000,2000,3000"),
            ("FAKE_CUDA_NAMES", "NVIDIA H200,,"),
            ("FAKE_CUDA_BUSY", "1"),
            ("FAKE_CUDA_ATTR_20", ",,2"),
        ],
    );
}

#[test]
fn nvml_wrapper_sees_an_absent_driver() {
    run_scenario("wrapper_absent", &[("FAKE_NVML_ABSENT", "1")]);
}
