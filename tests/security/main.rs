//! The adversarial suite: every case of the security catalogue (the list below; each test's doc
//! quotes its case and the safe outcome it requires), each attempted against the real engine and
//! checked for that outcome inside the sandbox and on the host. Every case takes a
//! [`HostWatch`](common::host_watch::HostWatch) before it runs (canaries outside the workspace,
//! a snapshot of the test's directory) and finishes with it: canaries unchanged, nothing created
//! or changed outside the workspace and skills directories, the server still running `print(1)`,
//! no container left. [`harness::watched`] does both around a case's own steps; case 36, which
//! starts the server binary itself, takes its watch by hand.
//!
//! Sandbox code reports a JSON verdict (its `result`); the assertions are on the parsed values.
//! That code is in `probes/`, a file per case (named by its number) plus the preludes some cases
//! put in front (`net_probe.py`, `cgroup.py`, `channel_fds.py`, `syscalls.py`), included as they
//! are: a probe's free names are the case's context variables and its prelude's functions. Probes
//! of a few lines stay next to their assertions.
//!
//! Case → test:
//!
//! Filesystem escape (`tests/security/filesystem.rs`):
//! - 1 [`filesystem::case_01_file_tool_names_are_refused_before_any_disk_access`]
//! - 2 [`filesystem::case_02_planted_symlinks_are_never_followed_by_the_file_tools`]
//! - 3 [`filesystem::case_03_a_directory_swapped_for_a_symlink_mid_call_never_leads_outside`]
//! - 4 [`filesystem::case_04_hard_links_out_of_the_workspace_fail_and_linked_names_are_replaced_not_written`]
//! - 5 [`filesystem::case_05_proc_root_and_cwd_links_show_only_the_container`]
//! - 6 [`filesystem::case_06_device_nodes_cannot_be_made_and_host_devices_are_absent`]
//! - 7 [`filesystem::case_07_writes_under_the_root_filesystem_get_erofs`]
//! - 8 [`filesystem::case_08_fifos_sockets_devices_and_sparse_files_are_refused_without_blocking`]
//! - 9 [`filesystem::case_09_a_hundred_thousand_files_and_odd_names_list_bounded_and_usable`]
//! - 10 [`filesystem::case_10_filling_the_workspace_past_its_quota_gets_enospc`] (root: the
//!   loop-mounted quota) and [`filesystem::case_10_filling_the_workspace_past_a_soft_quota_gets_a_quota_error`]
//! - 11 [`filesystem::case_11_filling_tmp_gets_enospc_at_its_size`]
//!
//! Network (`tests/security/network.rs`):
//! - 12 [`network::case_12_dns_lookups_fail`]
//! - 13 [`network::case_13_public_addresses_the_bridge_gateway_and_the_metadata_service_are_unreachable`]
//! - 14 [`network::case_14_ipv6_reaches_nothing_but_loopback`]
//! - 15 [`network::case_15_raw_and_packet_sockets_are_refused`]
//! - 16 [`network::case_16_engine_sockets_are_absent`]
//! - 17 [`network::case_17_netlink_changes_to_links_addresses_and_routes_are_refused`]
//!
//! Resources (`tests/security/resources.rs`):
//! - 18 [`resources::case_18_a_fork_bomb_stops_at_the_pids_limit`]
//! - 19 [`resources::case_19_a_thread_bomb_stops_at_the_pids_limit`]
//! - 20 [`resources::case_20_a_memory_bomb_is_killed_and_reported_as_the_memory_limit`]
//! - 21 [`resources::case_21_a_busy_loop_is_killed_at_the_deadline`]
//! - 22 [`resources::case_22_code_ignoring_sigterm_is_sigkilled_at_the_deadline`]
//! - 23 [`resources::case_23_a_double_forked_daemon_is_gone_with_the_container`]
//! - 24 [`resources::case_24_a_gigabyte_to_stdout_is_capped_and_the_server_stays_small`]
//! - 25 [`resources::case_25_a_100_mb_line_and_binary_output_are_bounded_and_decoded_lossily`]
//! - 26 [`resources::case_26_opening_files_stops_at_the_nofile_limit`]
//! - 27 [`resources::case_27_a_huge_result_is_capped_and_marked`]
//!
//! Privilege (`tests/security/privilege.rs`):
//! - 28 [`privilege::case_28_the_sandbox_posture`]
//! - 29 [`privilege::case_29_setuid_programs_su_and_chmod_u_s_do_not_escalate`]
//! - 30 [`privilege::case_30_mount_unshare_setns_and_pivot_root_are_refused`]
//! - 31 [`privilege::case_31_ptrace_and_process_vm_access_are_refused_and_only_the_container_is_in_sight`]
//! - 32 [`privilege::case_32_keyctl_and_add_key_are_refused`]
//! - 33 [`privilege::case_33_writes_to_proc_sys_sysrq_and_cgroups_are_denied`]
//! - 34 [`privilege::case_34_io_uring_bpf_perf_userfaultfd_and_module_loading_are_refused`]
//! - 35 [`privilege::case_35_proc_kcore_and_proc_keys_are_masked`]
//!
//! Information leaks (`tests/security/leaks.rs`):
//! - 36 [`leaks::case_36_the_servers_environment_never_reaches_the_sandbox`]
//! - 37 [`leaks::case_37_a_canary_in_tmp_is_gone_next_time_and_invisible_to_concurrent_executions`]
//! - 38 [`leaks::case_38_mountinfo_reveals_no_host_paths_beyond_the_workspace`]
//! - 39 [`leaks::case_39_another_instances_workspace_skills_and_tokens_are_out_of_reach`] (between
//!   server instances); between HTTP tenants of one server: `tests/tenants.rs` and, in the
//!   compose stack, `tests/compose.rs`
//!
//! Server-side input (`tests/security/server_input.rs`):
//! - 40 [`server_input::case_40_a_100_mb_code_string_is_refused_before_the_engine`]
//! - 41 [`server_input::case_41_nul_and_invalid_utf8_in_code_get_clear_errors`]
//! - 42 `tests/protocol_robustness.rs` (malformed JSON-RPC over stdio and HTTP)
//! - 43 [`server_input::case_43_bad_skill_names_are_refused_by_the_allowlist_before_any_path`]
//! - 44 [`server_input::case_44_forged_and_foreign_tokens_never_resolve`]
//! - 45 [`server_input::case_45_output_shaped_like_frames_or_json_rpc_is_carried_as_data`]
//! - 46 [`server_input::case_46_out_of_range_limits_are_clamped_and_the_response_says_so`]
//! - 47 [`server_input::case_47_a_burst_beyond_the_queue_gets_a_clear_busy_error`]
//! - 48 `tests/faults/engine_stopped.rs` (the engine stops mid-execution)
//! - 49 `tests/faults/server_killed.rs` (the server is SIGKILLed mid-execution)

#[path = "../common/mod.rs"]
mod common;
mod harness;

mod filesystem;
mod leaks;
mod network;
mod privilege;
mod resources;
mod server_input;

/// The suite's sandboxes run under the runtime and read `/usr` from where CI's step asked
/// (`CEM_RUNTIME`, `CEM_IMAGE_TREE`; unset: the engine's defaults), from inside and from the
/// engine: a variable that did not reach the servers would have every case pass elsewhere.
#[tokio::test]
async fn the_suite_runs_under_the_runtime_and_image_tree_it_was_asked_for() {
    common::placement::assert_runs_where_asked().await;
}

/// The suite runs on the image of the profile it was asked for (`CEM_IMAGE_PROFILE`, default
/// data), and says which, so a pass names the image it covered.
#[tokio::test]
async fn the_suite_runs_on_the_image_profile_it_was_asked_for() {
    let wanted = std::env::var("CEM_IMAGE_PROFILE").unwrap_or_else(|_| "data".into());
    let t = common::TestApp::start().await;
    let image = t.app.config().sandbox.image_tag();
    // Straight to the terminal: libtest captures `eprintln!` and shows it only on failure.
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "security suite on {image}");
    let label = std::process::Command::new("docker")
        .args([
            "image",
            "inspect",
            "-f",
            "{{index .Config.Labels \"io.code-execution-mcp.profile\"}}",
            &image,
        ])
        .output()
        .expect("docker image inspect");
    assert_eq!(String::from_utf8_lossy(&label.stdout).trim(), wanted);
    let o = t
        .run("import importlib.util\nresult = importlib.util.find_spec('pandas') is not None")
        .await;
    assert_eq!(
        o.result,
        serde_json::json!(wanted == "data"),
        "{:?}",
        o.error
    );
    t.finish().await;
}
