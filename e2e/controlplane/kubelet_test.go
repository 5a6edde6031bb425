package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// The kubelet endpoints speak both stream transports the API server may use
// towards a kubelet: SPDY and WebSocket (v4 channel protocol).
func TestKubeletStreamsOverSPDYAndWebSocket(t *testing.T) {
	dir := t.TempDir()
	p, err := newPKI(filepath.Join(dir, "pki"))
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1"},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c"}}},
	}
	shells := newTestManager(t, dir, nil, nil)
	k, err := newKubelet(shells, func(_ context.Context, ns, name string, _ bool) (*corev1.Pod, bool) {
		return pod, ns == "ns" && name == "p"
	}, p)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go k.serve(ln)
	defer k.shutdown()
	cfg := &rest.Config{
		Host: "https://" + ln.Addr().String(),
		TLSClientConfig: rest.TLSClientConfig{
			CAFile: p.CACertFile, CertFile: p.KubeletClientCert, KeyFile: p.KubeletClientKey,
		},
	}

	executors := map[string]func(method, path string) (remotecommand.Executor, error){
		"spdy": func(method, path string) (remotecommand.Executor, error) {
			u, err := url.Parse(cfg.Host + path)
			if err != nil {
				return nil, err
			}
			return remotecommand.NewSPDYExecutor(cfg, method, u)
		},
		"websocket": func(_, path string) (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutorForProtocols(cfg, "GET", cfg.Host+path, "v4.channel.k8s.io")
		},
	}
	for name, newExecutor := range executors {
		t.Run(name+"/exec", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ex, err := newExecutor("POST", "/exec/ns/p/c?command=echo&command=hello&output=1&error=1")
			if err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &errOut}); err != nil {
				t.Fatalf("exec: %v (stderr %q)", err, errOut.String())
			}
			if out.String() != "hello\n" {
				t.Fatalf("stdout %q, want %q", out.String(), "hello\n")
			}
		})
		t.Run(name+"/attach", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ex, err := newExecutor("POST", "/attach/ns/p/c?input=1&output=1&tty=1")
			if err != nil {
				t.Fatal(err)
			}
			stdinR, stdinW := io.Pipe()
			out := &syncBuffer{}
			sizes := &sizeQueue{ch: make(chan *remotecommand.TerminalSize, 1)}
			done := make(chan error, 1)
			go func() {
				done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{
					Stdin: stdinR, Stdout: out, Tty: true, TerminalSizeQueue: sizes,
				})
			}()
			sizes.ch <- &remotecommand.TerminalSize{Width: 111, Height: 33}
			waitFor := func(line string) {
				deadline := time.Now().Add(10 * time.Second)
				for time.Now().Before(deadline) {
					_, _ = io.WriteString(stdinW, "stty size\n")
					time.Sleep(200 * time.Millisecond)
					for _, l := range strings.Split(out.String(), "\n") {
						if strings.TrimPrefix(strings.TrimRight(l, "\r"), "$ ") == line {
							return
						}
					}
				}
				t.Fatalf("no line %q in attach output %q", line, out.String())
			}
			waitFor("33 111")
			if name == "websocket" {
				// v4 WebSocket has no way to signal the end of stdin (v5
				// added one, but kubelets only speak up to v4): hang up.
				cancel()
				<-done
				return
			}
			_ = stdinW.Close()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("attach: %v", err)
				}
			case <-ctx.Done():
				t.Fatal("attach did not end after stdin closed")
			}
		})
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type sizeQueue struct {
	ch chan *remotecommand.TerminalSize
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize { return <-q.ch }
