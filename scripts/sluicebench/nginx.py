"""nginx for the measurement scripts: a static origin or a reverse proxy,
each in its own prefix directory, started in the foreground (`daemon off`)
and stopped by its PID through procs.Proc."""

import os
import pwd

from .procs import Proc, wait_for
from . import net

CONF = """{user}
worker_processes 1;
worker_rlimit_nofile {nofile};
error_log {dir}/error.log warn;
pid {dir}/nginx.pid;
events {{ worker_connections {conns}; }}
http {{
    client_body_temp_path {dir}/client_body_temp;
    proxy_temp_path {dir}/proxy_temp;
    fastcgi_temp_path {dir}/fastcgi_temp;
    uwsgi_temp_path {dir}/uwsgi_temp;
    scgi_temp_path {dir}/scgi_temp;
    log_format conn '$connection';
    access_log {access};
    keepalive_requests 1000000;
    {http_extra}
    {upstream_block}
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        {server_body}
    }}
}}
"""


def user_line():
    return "user %s;" % pwd.getpwuid(os.geteuid()).pw_name if os.geteuid() == 0 else ""


def start(name, tmp, server_body, http_extra="", upstream_port=None, upstream_extra="",
          access=False, nofile=20000, conns=16000):
    """Starts nginx NAME (its directory under TMP) serving SERVER_BODY on a free
    port; with UPSTREAM_PORT an `upstream origin` block to it (keepalive 128 plus
    UPSTREAM_EXTRA). ACCESS logs each request's connection serial number to
    DIR/access.log. Returns (Proc, port, dir)."""
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    port = net.free_port()
    up = ""
    if upstream_port:
        up = ("upstream origin { server 127.0.0.1:%d; keepalive 128; keepalive_requests 1000000; %s }"
              % (upstream_port, upstream_extra))
    conf = CONF.format(user=user_line(), nofile=nofile, dir=d, conns=conns, port=port,
                       access=(d + "/access.log conn buffer=64k flush=200ms") if access else "off",
                       http_extra=http_extra, upstream_block=up, server_body=server_body.replace("@DIR@", d))
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(conf)
    p = Proc(name, ["nginx", "-p", d, "-c", os.path.join(d, "nginx.conf"), "-g", "daemon off;"],
             os.path.join(d, "stderr.log"))
    if not wait_for(lambda: net.listening(port), 10):
        raise RuntimeError(f"{name} did not start:\n{p.log_tail()}")
    return p, port, d


PROXY_LOCATION = """location / {
            proxy_pass http://origin;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }"""


def worker_pids(p):
    """nginx's master and workers (the RSS to count)."""
    return p.pids()
