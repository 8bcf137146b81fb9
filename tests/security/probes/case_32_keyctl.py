
result = {
    "keyctl_session_id": call("keyctl", 0, -3, 1),
    "keyctl_join_session": call("keyctl", 1, b"cem-evil"),
    "keyctl_describe_user": call("keyctl", 6, -4, buf(), 256),
    "add_key_process": call("add_key", b"user", b"cem", b"secret", 6, -2),
    "add_key_user": call("add_key", b"user", b"cem", b"secret", 6, -4),
    "request_key": call("request_key", b"user", b"cem", None, 0),
}
