
null = os.open("/dev/null", os.O_RDONLY)
calls = {
    "io_uring_setup": call("io_uring_setup", 8, buf(120)),
    "bpf_map_create": call("bpf", 0, buf(128), 128),
    "bpf_prog_load": call("bpf", 5, buf(128), 128),
    "perf_event_open": call("perf_event_open", buf(128), 0, -1, -1, 0),
    "userfaultfd": call("userfaultfd", 0),
    "init_module": call("init_module", buf(64), 64, b""),
    "finit_module": call("finit_module", null, b"", 0),
    "delete_module": call("delete_module", b"loop", 0),
    "kexec_load": call("kexec_load", 0, 0, None, 0),
    "kexec_file_load": call("kexec_file_load", null, null, 0, b"", 0),
    "open_by_handle_at": call("open_by_handle_at", -100, buf(64), 0),
    "swapon": call("swapon", b"/tmp/swap", 0),
    "reboot": call("reboot", 0xfee1dead, 0x28121969, 0x4321fedc, None),
    "syslog": call("syslog", 3, buf(), 256),
}
if "iopl" in NR:
    calls["iopl"] = call("iopl", 3)
    calls["ioperm"] = call("ioperm", 0x80, 1, 1)
result = calls
