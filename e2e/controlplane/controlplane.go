package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// controlPlane is one running instance: etcd, API server, controllers,
// simulated node and kubelet.
type controlPlane struct {
	o       cliOptions
	started time.Time
	ctx     context.Context
	cancel  context.CancelFunc

	pki       *pki
	ids       *identities
	caPEM     []byte
	server    string
	issuer    string
	apiLn     net.Listener
	kubeletLn net.Listener
	apiPort   int
	kubeletPt int
	etcdPorts []int
	trust     *trustSource
	tokenFile string
	kcmConfig string
	authnFile string

	etcd    *embed.Etcd
	apiDone chan struct{}
	apiErr  error
	kcmDone chan struct{}
	shells  *shellManager
	kubelet *kubelet
	sim     *nodeSim
	admin   kubernetes.Interface

	stopOnce sync.Once
}

// prepare makes directories, logging, keys, ports and identity files.
func (cp *controlPlane) prepare() error {
	o := &cp.o
	var err error
	if o.dataDir, err = filepath.Abs(o.dataDir); err != nil {
		return err
	}
	if o.kubeconfigDir, err = filepath.Abs(o.kubeconfigDir); err != nil {
		return err
	}
	for _, d := range []string{o.dataDir, o.kubeconfigDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if o.logFile == "" {
		o.logFile = filepath.Join(o.kubeconfigDir, "controlplane.log")
	}
	if o.logFile != "-" {
		if o.logFile, err = filepath.Abs(o.logFile); err != nil {
			return err
		}
		f, err := os.OpenFile(o.logFile, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		// Everything the components log (klog, etcd's zap logger, panics)
		// goes to fd 2: point it at the log file, keep stdout for READY.
		if err := unix.Dup2(int(f.Fd()), 2); err != nil {
			return err
		}
	}

	if o.trustIssuerDir != "" {
		if cp.trust, err = loadTrustSource(o.trustIssuerDir); err != nil {
			return err
		}
		if cp.trust.info.ClusterName == o.clusterName {
			return fmt.Errorf("--cluster-name %q is the trusted home instance's name too; pick another", o.clusterName)
		}
	}

	if cp.pki, err = newPKI(filepath.Join(o.dataDir, "pki")); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if cp.caPEM, err = os.ReadFile(cp.pki.CACertFile); err != nil {
		return err
	}

	if cp.apiLn, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.port))); err != nil {
		return fmt.Errorf("apiserver port: %w", err)
	}
	cp.apiPort = cp.apiLn.Addr().(*net.TCPAddr).Port
	if cp.kubeletLn, err = net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(o.kubeletPort))); err != nil {
		return fmt.Errorf("kubelet port: %w", err)
	}
	cp.kubeletPt = cp.kubeletLn.Addr().(*net.TCPAddr).Port
	if cp.etcdPorts, err = freePorts(2); err != nil {
		return err
	}
	cp.server = "https://127.0.0.1:" + strconv.Itoa(cp.apiPort)
	cp.issuer = cp.server

	if cp.ids, err = newIdentities(); err != nil {
		return err
	}
	cp.tokenFile = filepath.Join(o.dataDir, "tokens.csv")
	if err := cp.ids.writeTokenFile(cp.tokenFile); err != nil {
		return err
	}
	cp.kcmConfig = filepath.Join(o.dataDir, "controller-manager.kubeconfig")
	if err := writeKubeconfig(cp.kcmConfig, o.clusterName, cp.server, cp.caPEM, cp.ids.controllerManager.Token, ""); err != nil {
		return err
	}
	if cp.trust != nil {
		cp.authnFile = filepath.Join(o.dataDir, "authentication-config.json")
		if err := cp.trust.writeAuthenticationConfig(cp.authnFile, o.clusterName); err != nil {
			return err
		}
	}
	return nil
}

// startComponents starts etcd, the API server (waiting until it is ready),
// the controllers, the simulated node and its kubelet.
func (cp *controlPlane) startComponents() error {
	var err error
	if cp.etcd, err = startEtcd(filepath.Join(cp.o.dataDir, "etcd"), cp.etcdPorts[0], cp.etcdPorts[1]); err != nil {
		return err
	}
	klog.InfoS("etcd ready", "elapsed", time.Since(cp.started))

	apiOpts, err := newAPIServer(apiserverConfig{
		listener: cp.apiLn, port: cp.apiPort, etcdClientPort: cp.etcdPorts[0], dataDir: cp.o.dataDir, pki: cp.pki,
		tokenFile: cp.tokenFile, authnConfig: cp.authnFile, issuer: cp.issuer,
	})
	if err != nil {
		return err
	}
	kcm, err := newKCM(cp.kcmConfig, cp.pki)
	if err != nil {
		return err
	}
	// Both components added their flags to the shared feature-gate and
	// version registry; apply it once.
	if err := compatibility.DefaultComponentGlobalsRegistry.Set(); err != nil {
		return err
	}

	apiErr := runAPIServer(cp.ctx, apiOpts)
	cp.apiDone = make(chan struct{})
	go func() {
		cp.apiErr = <-apiErr
		close(cp.apiDone)
	}()

	if cp.admin, err = kubernetes.NewForConfig(cp.ids.admin.restConfig(cp.server, cp.caPEM)); err != nil {
		return err
	}
	if err := cp.waitAPIServerReady(); err != nil {
		return err
	}
	klog.InfoS("apiserver ready", "elapsed", time.Since(cp.started))

	cp.kcmDone = make(chan struct{})
	go func() {
		defer close(cp.kcmDone)
		if err := kcm.run(cp.ctx); err != nil && cp.ctx.Err() == nil {
			klog.ErrorS(err, "controller manager stopped")
		}
	}()

	nodeClient, err := kubernetes.NewForConfig(cp.ids.nodeSim.restConfig(cp.server, cp.caPEM))
	if err != nil {
		return err
	}
	cp.sim = newNodeSim(nodeClient, cp.kubeletPt)
	cp.shells, err = newShellManager(filepath.Join(cp.o.dataDir, "containers"), cp.sim.bootID, cp.sim.containerExited)
	if err != nil {
		return err
	}
	cp.shells.spec = cp.sim.containerSpec
	cp.shells.image = cp.o.debugImageDir
	cp.sim.shells = cp.shells
	cp.kubelet, err = newKubelet(cp.shells, func(ctx context.Context, ns, name string, fresh bool) (*corev1.Pod, bool) {
		return cp.sim.pod(ctx, ns, name, fresh)
	}, cp.pki)
	if err != nil {
		return err
	}
	go cp.kubelet.serve(cp.kubeletLn)
	if err := cp.sim.registerNode(cp.ctx); err != nil {
		return err
	}
	if err := cp.sim.run(cp.ctx); err != nil {
		return err
	}
	klog.InfoS("node ready", "elapsed", time.Since(cp.started))
	return nil
}

func (cp *controlPlane) waitAPIServerReady() error {
	var last string
	err := wait.PollUntilContextTimeout(cp.ctx, 100*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-cp.apiDone:
			return false, fmt.Errorf("apiserver exited: %v", cp.apiErr)
		default:
		}
		body, err := cp.admin.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			last = err.Error() + " " + string(body)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for apiserver /readyz: %w (last: %s)", err, last)
	}
	return nil
}

// bootstrap creates what tests expect to find, writes the kubeconfigs and
// returns the READY information.
func (cp *controlPlane) bootstrap() (*readyInfo, error) {
	ctx := cp.ctx
	c := cp.admin
	// Other clusters' JWT authenticators read the issuer's discovery document
	// and keys without credentials.
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "controlplane:service-account-issuer-discovery:unauthenticated"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:service-account-issuer-discovery"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "system:unauthenticated"}},
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create %s: %w", crb.Name, err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "breakglass"}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("create namespace breakglass: %w", err)
	}
	// The server's own identity (in-cluster case) and the actor whose
	// minted tokens other clusters trust. Neither gets any rights here.
	for _, name := range []string{"breakglass-server", "tower-actor"} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "breakglass"}}
		if _, err := c.CoreV1().ServiceAccounts("breakglass").Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create service account breakglass/%s: %w", name, err)
		}
	}
	exp := int64(7 * 24 * 3600)
	tr, err := c.CoreV1().ServiceAccounts("breakglass").CreateToken(ctx, "breakglass-server", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token for breakglass/breakglass-server: %w", err)
	}

	// Controllers are up once the default ServiceAccounts exist.
	for _, nsName := range []string{"default", "breakglass"} {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := c.CoreV1().ServiceAccounts(nsName).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			return nil, fmt.Errorf("waiting for ServiceAccount %s/default (controller manager): %w", nsName, err)
		}
	}
	klog.InfoS("controllers ready", "elapsed", time.Since(cp.started))

	kdir := cp.o.kubeconfigDir
	name := cp.o.clusterName
	info := &readyInfo{
		ClusterName:    name,
		Server:         cp.server,
		APIServerPort:  cp.apiPort,
		KubeletPort:    cp.kubeletPt,
		EtcdClientPort: cp.etcdPorts[0],
		EtcdPeerPort:   cp.etcdPorts[1],
		Issuer:         cp.issuer,
		NodeName:       nodeName,
		KubeconfigDir:  kdir,
		DataDir:        cp.o.dataDir,
		LogFile:        cp.o.logFile,
		CAFile:         filepath.Join(kdir, "ca.crt"),
		SAPublicKey:    filepath.Join(kdir, "sa.pub"),
		JWKSFile:       filepath.Join(kdir, "jwks.json"),
		Kubeconfigs:    map[string]string{},
		Users: map[string]string{
			"admin":           cp.ids.admin.User,
			"breakglass-sa":   "system:serviceaccount:breakglass:breakglass-server",
			"breakglass-user": cp.ids.breakglassUser.User,
			"alice":           cp.ids.alice.User,
			"bob":             cp.ids.bob.User,
		},
		PID:         os.Getpid(),
		KubeVersion: kubeVersion,
	}
	if err := copyFile(cp.pki.CACertFile, info.CAFile); err != nil {
		return nil, err
	}
	if err := copyFile(cp.pki.ServiceAccountPubKey, info.SAPublicKey); err != nil {
		return nil, err
	}
	for _, k := range []struct {
		name, token, namespace string
	}{
		{"admin", cp.ids.admin.Token, "default"},
		{"breakglass-sa", tr.Status.Token, "breakglass"},
		{"breakglass-user", cp.ids.breakglassUser.Token, "default"},
		{"alice", cp.ids.alice.Token, "default"},
		{"bob", cp.ids.bob.Token, "default"},
	} {
		path := filepath.Join(kdir, k.name+".kubeconfig")
		if err := writeKubeconfig(path, name, cp.server, cp.caPEM, k.token, k.namespace); err != nil {
			return nil, err
		}
		info.Kubeconfigs[k.name] = path
	}

	// The issuer's keys, fetched the way another cluster would: without
	// credentials.
	jwks, err := anonymousGet(cp.server+"/openid/v1/jwks", cp.caPEM)
	if err != nil {
		return nil, fmt.Errorf("anonymous JWKS fetch: %w", err)
	}
	if err := os.WriteFile(info.JWKSFile, jwks, 0o644); err != nil {
		return nil, err
	}

	if cp.trust != nil {
		if err := cp.trust.probe(ctx, &kubernetesTarget{server: cp.server, caPEM: cp.caPEM}, name); err != nil {
			return nil, err
		}
		info.TrustedIssuer = &trustedIssuer{
			Issuer:         cp.trust.info.Issuer,
			HomeCluster:    cp.trust.info.ClusterName,
			Audience:       name,
			UsernamePrefix: cp.trust.usernamePrefix(),
		}
	}

	info.StartSeconds = time.Since(cp.started).Seconds()
	if err := writeJSONFile(filepath.Join(kdir, "controlplane.json"), info); err != nil {
		return nil, err
	}
	return info, nil
}

// stop shuts everything down (idempotent) and removes the data dir unless
// asked to keep it.
func (cp *controlPlane) stop() {
	cp.stopOnce.Do(func() {
		cp.cancel()
		if cp.kubelet != nil {
			cp.kubelet.shutdown()
		}
		if cp.shells != nil {
			cp.shells.closeAll()
		}
		if cp.apiDone != nil {
			select {
			case <-cp.apiDone:
			case <-time.After(10 * time.Second):
				klog.InfoS("apiserver did not stop within 10s")
			}
		}
		if cp.kcmDone != nil {
			select {
			case <-cp.kcmDone:
			case <-time.After(3 * time.Second):
			}
		}
		if cp.etcd != nil {
			cp.etcd.Close()
		}
		if cp.apiLn != nil {
			_ = cp.apiLn.Close()
		}
		if cp.kubeletLn != nil {
			_ = cp.kubeletLn.Close()
		}
		if !cp.o.keepData && cp.o.dataDir != "" {
			if err := os.RemoveAll(cp.o.dataDir); err != nil {
				klog.ErrorS(err, "removing data dir")
			}
		}
		klog.InfoS("stopped")
		klog.Flush()
	})
}

func anonymousGet(url string, caPEM []byte) ([]byte, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	resp, err := client.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return body, nil
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o644)
}
