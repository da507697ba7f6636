//! What every bench pod of one command shares, read once from its flags: the image, the
//! privileges, the devices and the engine flags both sides get. Each pods plan takes it through
//! its constructor ([`crate::pair::BenchPodsPlan::new`] for a pair's two bench pods, the node
//! pods of rails and KV ranks in `icb_rails::kube`), so "flags → pod fields" is written
//! once per command instead of once per plan.

use crate::devices::DeviceRequest;

/// The bench pods' options of one command (`pair`, `gate`, `sweep`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodOptions {
    /// `--image`, or the default bench image.
    pub image: String,
    /// `--image-pull-policy`, spelled as Kubernetes spells it (`None`: the cluster's default).
    pub image_pull_policy: Option<String>,
    /// `--privileged`.
    pub privileged: bool,
    /// `--host-ipc` / `--host-pid`.
    pub host_ipc: bool,
    pub host_pid: bool,
    /// `--memlock-unlimited`: RDMA bench pods stay non-root without IPC_LOCK.
    pub memlock_unlimited: bool,
    /// `--service-account`.
    pub service_account: Option<String>,
    /// `--gpus`, `--rdma`, `--resource` (defaults from the node for node targets).
    pub devices: DeviceRequest,
    /// The engine selection both sides get (`--engine nixl`, `--ucx-profile`, …).
    pub side_flags: Vec<String>,
}

impl PodOptions {
    /// Options with nothing asked beyond the image and the sides' engine flags: nothing
    /// privileged, no host namespaces, devices from the nodes.
    pub fn new(image: String, side_flags: Vec<String>) -> PodOptions {
        PodOptions {
            image,
            side_flags,
            ..PodOptions::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pair::BenchPodsPlan;
    use crate::target::Target;
    use std::time::Duration;

    /// Every option reaches both bench pods through the constructor (no field is poked after
    /// it), and the engine flags follow the server's idle timeout and the client's command.
    #[test]
    fn bench_pods_take_every_option_through_their_constructor() {
        let options = PodOptions {
            image_pull_policy: Some("Never".into()),
            privileged: true,
            host_ipc: true,
            host_pid: true,
            memlock_unlimited: true,
            service_account: Some("bench".into()),
            devices: DeviceRequest {
                gpus: Some(2),
                ..DeviceRequest::default()
            },
            ..PodOptions::new("img:1".into(), vec!["--engine".into(), "nixl".into()])
        };
        let targets = (Target::Node("a".into()), Target::Node("b".into()));
        let pods = BenchPodsPlan::new(
            targets,
            "r1".into(),
            &options,
            Duration::from_secs(90),
            Duration::from_secs(45),
        );
        assert_eq!(
            (pods.image.as_str(), pods.image_pull_policy.as_deref()),
            ("img:1", Some("Never"))
        );
        assert!(pods.privileged && pods.host_ipc && pods.host_pid && pods.memlock_unlimited);
        assert_eq!(pods.service_account.as_deref(), Some("bench"));
        assert_eq!(pods.devices.gpus, Some(2));
        assert_eq!(pods.serve_args, ["--idle-timeout", "90s", "--engine", "nixl"]);
        assert_eq!(pods.connect_args, ["--engine", "nixl"]);
        assert_eq!(pods.cleanup_timeout, Duration::from_secs(45));
        // Nothing asked: nothing privileged, devices from the nodes.
        let plain = PodOptions::new("img:1".into(), vec![]);
        let targets = (Target::Node("a".into()), Target::Node("b".into()));
        let pods = BenchPodsPlan::new(
            targets,
            "r1".into(),
            &plain,
            Duration::from_secs(1),
            Duration::from_secs(1),
        );
        assert!(!pods.privileged && !pods.host_ipc && !pods.host_pid && !pods.memlock_unlimited);
        assert_eq!((pods.image_pull_policy, pods.service_account), (None, None));
        assert_eq!(pods.devices, DeviceRequest::default());
        assert_eq!(pods.cleanup_timeout, Duration::from_secs(30));
    }
}
