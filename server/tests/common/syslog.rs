//! A real syslog collector for the SIEM tests: rsyslog (Debian's `rsyslog` and
//! `rsyslog-gnutls`, which `scripts/test-env.sh` installs) on two loopback ports, plain TCP and
//! TLS (a certificate for 127.0.0.1 from a CA made here with `openssl`), each writing what it
//! parsed of every RFC 5424 message (PRI, version, host, app, procid, msgid, text) as one
//! `|`-separated line to a file of its own.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The running collector; killed on drop.
pub struct Collector {
    child: Child,
    /// The plain TCP port.
    pub plain: u16,
    /// The TLS port.
    pub tls: u16,
    /// The CA that issued the TLS port's certificate.
    pub ca_file: PathBuf,
    dir: tempfile::TempDir,
}

/// One message as rsyslog parsed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub pri: String,
    pub version: String,
    pub host: String,
    pub app: String,
    pub procid: String,
    pub msgid: String,
    pub msg: String,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is needed for the syslog collector's certificate");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

impl Collector {
    /// Starts rsyslogd and waits until both ports take connections.
    pub fn start() -> Collector {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        openssl(
            d,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=breakglass test CA",
            ],
        );
        openssl(
            d,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        );
        std::fs::write(d.join("ext"), "subjectAltName=IP:127.0.0.1\n").unwrap();
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.pem",
                "-days",
                "2",
                "-extfile",
                "ext",
            ],
        );
        let (plain, tls) = (free_port(), free_port());
        let p = d.display();
        let conf = format!(
            r#"global(workDirectory="{p}" DefaultNetstreamDriverCAFile="{p}/ca.pem"
  DefaultNetstreamDriverCertFile="{p}/server.pem" DefaultNetstreamDriverKeyFile="{p}/server.key")
module(load="imtcp")
template(name="fields" type="string"
  string="%pri%|%protocol-version%|%hostname%|%app-name%|%procid%|%msgid%|%msg%\n")
ruleset(name="plain") {{ action(type="omfile" file="{p}/plain.log" template="fields") }}
ruleset(name="tls") {{ action(type="omfile" file="{p}/tls.log" template="fields") }}
input(type="imtcp" address="127.0.0.1" port="{plain}" ruleset="plain")
input(type="imtcp" address="127.0.0.1" port="{tls}" ruleset="tls" StreamDriver.Name="gtls"
  StreamDriver.Mode="1" StreamDriver.AuthMode="anon")
"#
        );
        std::fs::write(d.join("rsyslog.conf"), conf).unwrap();
        let child = Command::new("rsyslogd")
            .arg("-n")
            .arg("-f")
            .arg(d.join("rsyslog.conf"))
            .arg("-i")
            .arg(d.join("rsyslogd.pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("rsyslogd is not installed: scripts/test-env.sh installs rsyslog and rsyslog-gnutls");
        // The TLS port's probe is a bare TCP connection: rsyslog logs one failed handshake.
        let deadline = Instant::now() + Duration::from_secs(20);
        for port in [plain, tls] {
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    Instant::now() < deadline,
                    "rsyslogd did not listen on {port}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Collector {
            child,
            plain,
            tls,
            ca_file: d.join("ca.pem"),
            dir,
        }
    }

    /// What the `which` port (`plain` or `tls`) received so far.
    pub fn received(&self, which: &str) -> Vec<Parsed> {
        let text = std::fs::read_to_string(self.dir.path().join(format!("{which}.log")))
            .unwrap_or_default();
        text.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.splitn(7, '|').collect();
                (f.len() == 7).then(|| Parsed {
                    pri: f[0].into(),
                    version: f[1].into(),
                    host: f[2].into(),
                    app: f[3].into(),
                    procid: f[4].into(),
                    msgid: f[5].into(),
                    msg: f[6].trim_start().into(),
                })
            })
            .collect()
    }

    /// Waits until both ports received `n` messages or more (rsyslog writes its files as it
    /// goes); what they received.
    pub async fn until(&self, n: usize) -> (Vec<Parsed>, Vec<Parsed>) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (p, t) = (self.received("plain"), self.received("tls"));
            if p.len() >= n && t.len() >= n {
                return (p, t);
            }
            assert!(
                Instant::now() < deadline,
                "the collector has {} plain and {} TLS messages of {n}",
                p.len(),
                t.len()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
