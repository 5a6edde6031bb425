package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	logsapi "k8s.io/component-base/logs/api/v1"
	apiapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	apioptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// startEtcd runs a single-member etcd in dataDir and waits until it serves.
func startEtcd(dataDir string, clientPort, peerPort int) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "controlplane"
	cfg.Dir = dataDir
	clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(clientPort))}
	peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(peerPort))}
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.Name + "=" + peerURL.String()
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{"stderr"}
	// A throwaway test store: durability buys nothing, fsync costs a lot.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd: %w", err)
	case <-time.After(30 * time.Second):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("etcd did not become ready in 30s")
	}
}

// apiserverConfig is what the API server's flags are made from.
type apiserverConfig struct {
	listener       net.Listener
	port           int
	etcdClientPort int
	dataDir        string
	pki            *pki
	tokenFile      string
	authnConfig    string // --authentication-config file, "" for none
	issuer         string
}

// newAPIServer parses kube-apiserver flags into options. Like the
// controller manager's, it must run before the feature-gate registry is Set.
func newAPIServer(c apiserverConfig) (*apioptions.ServerRunOptions, error) {
	s := apioptions.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	named := s.Flags()
	for _, f := range named.FlagSets {
		fs.AddFlagSet(f)
	}
	p := c.pki
	args := []string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(c.etcdClientPort),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.port),
		"--cert-dir=" + filepath.Join(c.dataDir, "apiserver-certs"),
		"--tls-cert-file=" + p.ServingCertFile,
		"--tls-private-key-file=" + p.ServingKeyFile,
		"--client-ca-file=" + p.CACertFile,
		"--token-auth-file=" + c.tokenFile,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--service-account-issuer=" + c.issuer,
		"--service-account-jwks-uri=" + c.issuer + "/openid/v1/jwks",
		"--service-account-key-file=" + p.ServiceAccountPubKey,
		"--service-account-signing-key-file=" + p.ServiceAccountKey,
		"--kubelet-client-certificate=" + p.KubeletClientCert,
		"--kubelet-client-key=" + p.KubeletClientKey,
		"--kubelet-certificate-authority=" + p.CACertFile,
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false",
		"--enable-priority-and-fairness=false",
		"--event-ttl=30m",
		// The `kubernetes` Service's endpoints cannot be a loopback address;
		// nothing here runs in-cluster, so leave them out.
		"--endpoint-reconciler-type=none",
	}
	if c.authnConfig != "" {
		args = append(args, "--authentication-config="+c.authnConfig)
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("apiserver flags: %w", err)
	}
	s.SecureServing.Listener = c.listener
	s.SecureServing.BindPort = c.port
	s.SecureServing.ExternalAddress = net.ParseIP("127.0.0.1")
	return s, nil
}

// runAPIServer completes and validates the options, then serves until ctx
// ends. Errors before serving are returned on the channel as well.
func runAPIServer(ctx context.Context, s *apioptions.ServerRunOptions) <-chan error {
	errCh := make(chan error, 1)
	go func() {
		errCh <- func() error {
			featureGate := s.GenericServerRunOptions.ComponentGlobalsRegistry.FeatureGateFor(basecompatibility.DefaultKubeComponent)
			if err := logsapi.ValidateAndApply(s.Logs, featureGate); err != nil {
				return err
			}
			rest.SetDefaultWarningHandler(rest.NoWarnings{})
			completed, err := s.Complete(ctx)
			if err != nil {
				return err
			}
			if errs := completed.Validate(); len(errs) != 0 {
				return fmt.Errorf("invalid apiserver options: %v", errs)
			}
			return apiapp.Run(ctx, completed)
		}()
	}()
	return errCh
}
