package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/klog/v2"
	criremote "k8s.io/kubelet/pkg/cri/streaming/remotecommand"
)

// kubelet serves the part of the kubelet API the API server proxies to:
// attach, exec and container logs. Streams use the kubelet's own protocol
// code (SPDY and WebSocket, all remotecommand protocol versions).
type kubelet struct {
	shells *shellManager
	pods   podGetter
	server *http.Server
}

const (
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = remotecommandconsts.DefaultStreamCreationTimeout
)

// podGetter returns a pod bound to this node, from the informer cache or,
// with fresh, from the API server.
type podGetter func(ctx context.Context, namespace, name string, fresh bool) (*corev1.Pod, bool)

func newKubelet(shells *shellManager, pods podGetter, p *pki) (*kubelet, error) {
	cert, err := tls.LoadX509KeyPair(p.KubeletServingCert, p.KubeletServingKey)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(p.CACertFile)
	if err != nil {
		return nil, err
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AppendCertsFromPEM(caPEM)

	k := &kubelet{shells: shells, pods: pods}
	mux := http.NewServeMux()
	mux.HandleFunc("/attach/{ns}/{pod}/{container}", k.serveAttach)
	mux.HandleFunc("/attach/{ns}/{pod}/{uid}/{container}", k.serveAttach)
	mux.HandleFunc("/exec/{ns}/{pod}/{container}", k.serveExec)
	mux.HandleFunc("/exec/{ns}/{pod}/{uid}/{container}", k.serveExec)
	mux.HandleFunc("/containerLogs/{ns}/{pod}/{container}", k.serveLogs)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	k.server = &http.Server{
		Handler: mux,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			// Only the API server (with its kubelet client certificate)
			// talks to the kubelet.
			ClientAuth: tls.RequireAndVerifyClientCert,
			ClientCAs:  clientCAs,
			MinVersion: tls.VersionTLS12,
			// SPDY upgrades need HTTP/1.1.
			NextProtos: []string{"http/1.1"},
		},
		ReadHeaderTimeout: 30 * time.Second,
	}
	return k, nil
}

func (k *kubelet) serve(ln net.Listener) {
	if err := k.server.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		klog.ErrorS(err, "kubelet server stopped")
	}
}

func (k *kubelet) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = k.server.Shutdown(ctx)
	_ = k.server.Close()
}

// resolve checks that the pod is bound to this node and has the container.
func (k *kubelet) resolve(w http.ResponseWriter, req *http.Request) (containerKey, types.UID, bool) {
	key := containerKey{Namespace: req.PathValue("ns"), Pod: req.PathValue("pod"), Container: req.PathValue("container")}
	pod, ok := k.pods(req.Context(), key.Namespace, key.Pod, false)
	if !ok || !hasContainer(pod, key.Container) {
		// The cache may lag behind what the API server just validated (an
		// ephemeral container added a moment ago): ask it.
		pod, ok = k.pods(req.Context(), key.Namespace, key.Pod, true)
	}
	if !ok {
		http.Error(w, fmt.Sprintf("pod %s/%s not found on this node", key.Namespace, key.Pod), http.StatusNotFound)
		return key, "", false
	}
	if uid := req.PathValue("uid"); uid != "" && types.UID(uid) != pod.UID {
		http.Error(w, "pod UID mismatch", http.StatusNotFound)
		return key, "", false
	}
	if !hasContainer(pod, key.Container) {
		http.Error(w, fmt.Sprintf("container %s not found in pod %s/%s", key.Container, key.Namespace, key.Pod), http.StatusNotFound)
		return key, "", false
	}
	if endedForGood(pod, key.Container) {
		// A runtime has nothing left to attach to: an ended ephemeral
		// container never runs again, nor does a container its pod's
		// restart policy does not restart.
		http.Error(w, fmt.Sprintf("container %s in pod %s/%s is not running", key.Container, key.Namespace, key.Pod), http.StatusBadRequest)
		return key, "", false
	}
	return key, pod.UID, true
}

// endedForGood reports whether the pod's status says container name ended
// and will not run again: an ephemeral container, or a regular one shown
// terminated (the node shows a container it restarts as running).
func endedForGood(pod *corev1.Pod, name string) bool {
	if cs := findStatus(pod.Status.EphemeralContainerStatuses, name); cs != nil {
		return cs.State.Terminated != nil
	}
	cs := findStatus(pod.Status.ContainerStatuses, name)
	return cs != nil && cs.State.Terminated != nil
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

func (k *kubelet) serveAttach(w http.ResponseWriter, req *http.Request) {
	key, uid, ok := k.resolve(w, req)
	if !ok {
		return
	}
	opts, err := criremote.NewOptions(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	klog.V(2).InfoS("attach", "container", key.String(), "tty", opts.TTY, "stdin", opts.Stdin)
	criremote.ServeAttach(w, req, attacher{k.shells, key}, key.Namespace+"/"+key.Pod, uid, key.Container, opts,
		streamIdleTimeout, streamCreationTimeout, remotecommandconsts.SupportedStreamingProtocols)
}

func (k *kubelet) serveExec(w http.ResponseWriter, req *http.Request) {
	key, uid, ok := k.resolve(w, req)
	if !ok {
		return
	}
	opts, err := criremote.NewOptions(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := req.URL.Query()[corev1.ExecCommandParam]
	klog.V(2).InfoS("exec", "container", key.String(), "command", cmd, "tty", opts.TTY)
	criremote.ServeExec(w, req, executor{k.shells, key}, key.Namespace+"/"+key.Pod, uid, key.Container, cmd, opts,
		streamIdleTimeout, streamCreationTimeout, remotecommandconsts.SupportedStreamingProtocols)
}

func (k *kubelet) serveLogs(w http.ResponseWriter, req *http.Request) {
	key, _, ok := k.resolve(w, req)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	var data []byte
	if sh := k.shells.lookup(key); sh != nil {
		data = sh.logs()
	}
	if tail := req.URL.Query().Get("limitBytes"); tail != "" {
		if n, err := strconv.Atoi(tail); err == nil && n >= 0 && n < len(data) {
			data = data[:n]
		}
	}
	_, _ = w.Write(data)
}

// attacher and executor adapt the shell manager to the kubelet's streaming
// interfaces; the container was resolved from the URL already.
type attacher struct {
	shells *shellManager
	key    containerKey
}

func (a attacher) AttachContainer(ctx context.Context, _ string, _ types.UID, _ string, in io.Reader, out, errOut io.WriteCloser, _ bool, resize <-chan remotecommand.TerminalSize) error {
	return a.shells.attach(ctx, a.key, in, out, errOut, resize)
}

type executor struct {
	shells *shellManager
	key    containerKey
}

func (e executor) ExecInContainer(ctx context.Context, _ string, _ types.UID, _ string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	return e.shells.exec(ctx, e.key, cmd, in, out, errOut, tty, resize)
}
