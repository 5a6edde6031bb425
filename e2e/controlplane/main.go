// Command controlplane runs a real Kubernetes control plane for tests: an
// embedded etcd, kube-apiserver and the few kube-controller-manager
// controllers tests rely on, all in this one process, plus a simulated node
// whose kubelet endpoints (attach, exec, logs) are backed by real shells in
// PTYs.
//
//	controlplane --data-dir D --kubeconfig-dir K [--port P] [--cluster-name N]
//	             [--trust-issuer-dir K1] [--keep-data] [--exit-with-parent]
//
// Once everything serves it prints one line, `READY {json}`, on stdout (the
// same JSON is written to K/controlplane.json) and runs until SIGTERM/SIGINT
// (or, with --exit-with-parent, until its parent process goes away).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// kubeVersion is what the simulated node reports; the build script stamps
// the same value into the API server's /version.
var kubeVersion = "v1.35.8"

type cliOptions struct {
	dataDir        string
	kubeconfigDir  string
	port           int
	kubeletPort    int
	clusterName    string
	trustIssuerDir string
	keepData       bool
	logFile        string
	exitWithParent bool
	debugImageDir  string
}

func main() {
	runSubcommand()
	var o cliOptions
	flag.StringVar(&o.dataDir, "data-dir", "", "directory for etcd data, keys and certificates (required; removed on exit unless --keep-data)")
	flag.StringVar(&o.kubeconfigDir, "kubeconfig-dir", "", "directory to write kubeconfigs, ca.crt and controlplane.json into (required)")
	flag.IntVar(&o.port, "port", 0, "API server port on 127.0.0.1 (default: a free port)")
	flag.IntVar(&o.kubeletPort, "kubelet-port", 0, "simulated kubelet port on 127.0.0.1 (default: a free port)")
	flag.StringVar(&o.clusterName, "cluster-name", "controlplane", "name of this cluster: kubeconfig cluster/context name and the audience other clusters' tokens must carry here")
	flag.StringVar(&o.trustIssuerDir, "trust-issuer-dir", "", "kubeconfig dir of another instance whose service-account issuer this one trusts (JWT authenticator)")
	flag.BoolVar(&o.keepData, "keep-data", false, "keep the data dir on exit")
	flag.StringVar(&o.logFile, "log-file", "", "where component logs go (default: <kubeconfig-dir>/controlplane.log; '-' for stderr)")
	flag.BoolVar(&o.exitWithParent, "exit-with-parent", false, "shut down when the parent process exits")
	flag.StringVar(&o.debugImageDir, "debug-image-dir", defaultDebugImageDir(), "the debug image's files laid out as in the image (usr/local/bin/breakglass-supervisor, etc/breakglass/profile.sh), shown in every debug container; scripts/controlplane.sh build makes it beside the binary")
	flag.Parse()
	if o.dataDir == "" || o.kubeconfigDir == "" {
		fmt.Fprintln(os.Stderr, "usage: controlplane --data-dir D --kubeconfig-dir K [--port P] [--cluster-name N] [--trust-issuer-dir K1] [--keep-data]")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		fmt.Printf("FAILED %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		os.Exit(1)
	}
}

// defaultDebugImageDir is the debug image's files the build script lays out
// beside this binary (<binary>.image), if they are there.
func defaultDebugImageDir() string {
	self, err := os.Executable()
	if err != nil {
		return ""
	}
	dir := self + ".image"
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return dir
	}
	return ""
}

// readyInfo is printed after READY and written to controlplane.json.
type readyInfo struct {
	ClusterName    string            `json:"clusterName"`
	Server         string            `json:"server"`
	APIServerPort  int               `json:"apiserverPort"`
	KubeletPort    int               `json:"kubeletPort"`
	EtcdClientPort int               `json:"etcdClientPort"`
	EtcdPeerPort   int               `json:"etcdPeerPort"`
	Issuer         string            `json:"issuer"`
	NodeName       string            `json:"nodeName"`
	KubeconfigDir  string            `json:"kubeconfigDir"`
	DataDir        string            `json:"dataDir"`
	LogFile        string            `json:"logFile"`
	CAFile         string            `json:"caFile"`
	SAPublicKey    string            `json:"serviceAccountPublicKeyFile"`
	JWKSFile       string            `json:"jwksFile"`
	Kubeconfigs    map[string]string `json:"kubeconfigs"`
	Users          map[string]string `json:"users"`
	TrustedIssuer  *trustedIssuer    `json:"trustedIssuer,omitempty"`
	PID            int               `json:"pid"`
	StartSeconds   float64           `json:"startSeconds"`
	KubeVersion    string            `json:"kubeVersion"`
}

type trustedIssuer struct {
	Issuer         string `json:"issuer"`
	HomeCluster    string `json:"homeCluster"`
	Audience       string `json:"audience"`
	UsernamePrefix string `json:"usernamePrefix"`
}

func run(o cliOptions) error {
	cp := &controlPlane{o: o, started: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	cp.ctx, cp.cancel = ctx, cancel
	defer cp.stop()

	if err := cp.prepare(); err != nil {
		return err
	}
	sigCh := make(chan os.Signal, 2)
	signal.Notify(sigCh, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-sigCh
		klog.InfoS("shutting down", "signal", sig.String())
		cancel()
	}()
	if o.exitWithParent {
		go watchParent(ctx, cancel)
	}

	if err := cp.startComponents(); err != nil {
		return err
	}
	info, err := cp.bootstrap()
	if err != nil {
		return err
	}
	line, err := json.Marshal(info)
	if err != nil {
		return err
	}
	fmt.Printf("READY %s\n", line)
	klog.InfoS("control plane ready", "elapsed", time.Since(cp.started))

	select {
	case <-ctx.Done():
		return nil
	case <-cp.apiDone:
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("apiserver stopped: %v", cp.apiErr)
	}
}

// watchParent cancels ctx once this process is re-parented (its parent
// exited), so a crashed or killed test run leaves no control plane behind.
func watchParent(ctx context.Context, cancel context.CancelFunc) {
	ppid := os.Getppid()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if os.Getppid() != ppid {
				klog.InfoS("parent process exited, shutting down")
				cancel()
				return
			}
		}
	}
}

func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			_ = l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func writeJSONFile(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
