mod util;
use util::*;
#[test]
fn dbg_upgrade() {
    let _ = env_logger::builder().is_test(true).filter_level(log::LevelFilter::Trace).try_init();
    let upstream = Upstream::start(|mut conn: UpConn| {
        if conn.read_request().is_none() { return; }
        conn.send(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
        loop {
            let r = conn.wire.read_some(1024);
            eprintln!("UPSTREAM got {:?}", r.as_ref().map(|d| String::from_utf8_lossy(d).into_owned()));
            match r { Ok(data) if !data.is_empty() => { conn.send([b"echo:".as_slice(), &data].concat()); } _ => return }
        }
    });
    let proxy = start_forward_proxy(upstream.addr, |_| {});
    let mut client = proxy.client();
    client.send(b"GET /ws HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
    let resp = client.read_response();
    eprintln!("CLIENT resp {:?}", String::from_utf8_lossy(&resp.raw()));
    client.send(b"ping");
    let r = client.wire.read_some(100);
    eprintln!("CLIENT got {:?}", r.map(|d| String::from_utf8_lossy(&d).into_owned()));
}
