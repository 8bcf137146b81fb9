
import ctypes, errno, os, platform
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
NR = {
    "x86_64": dict(io_uring_setup=425, bpf=321, perf_event_open=298, userfaultfd=323, init_module=175,
                   finit_module=313, delete_module=176, kexec_load=246, kexec_file_load=320,
                   open_by_handle_at=304, keyctl=250, add_key=248, request_key=249, unshare=272,
                   setns=308, mount=165, umount2=166, pivot_root=155, chroot=161, ptrace=101,
                   process_vm_readv=310, process_vm_writev=311, clone=56, fsopen=430, open_tree=428,
                   move_mount=429, swapon=167, reboot=169, syslog=103, iopl=172, ioperm=173,
                   openat2=437, fchmodat2=452),
    "aarch64": dict(io_uring_setup=425, bpf=280, perf_event_open=241, userfaultfd=282, init_module=105,
                    finit_module=273, delete_module=106, kexec_load=104, kexec_file_load=294,
                    open_by_handle_at=265, keyctl=219, add_key=217, request_key=218, unshare=97,
                    setns=268, mount=40, umount2=39, pivot_root=41, chroot=51, ptrace=117,
                    process_vm_readv=270, process_vm_writev=271, clone=220, fsopen=430, open_tree=428,
                    move_mount=429, swapon=224, reboot=142, syslog=116, openat2=437, fchmodat2=452),
}[platform.machine()]
def call(name, *args):
    conv = [a if isinstance(a, (bytes, ctypes.Array)) or a is None else ctypes.c_long(a) for a in args]
    ctypes.set_errno(0)
    ret = _libc.syscall(ctypes.c_long(NR[name]), *conv)
    if ret == 0 and name == "clone":
        os._exit(0)  # a child the filter should never have allowed
    if ret == -1:
        e = ctypes.get_errno()
        return errno.errorcode.get(e, str(e))
    return f"returned {ret}"
buf = lambda n=256: ctypes.create_string_buffer(n)
