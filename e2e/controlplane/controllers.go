package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	ctrlapp "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	ctrloptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
)

// controllers is the subset of kube-controller-manager the tests need.
var controllers = []string{
	"serviceaccount-controller",                // the `default` ServiceAccount of each namespace
	"serviceaccount-token-controller",          // legacy SA token secrets, when asked for
	"root-ca-certificate-publisher-controller", // kube-root-ca.crt in each namespace
	"namespace-controller",                     // namespace deletion completes
	"garbage-collector-controller",             // owned objects go with their owner
	"replicaset-controller",
	"deployment-controller",
	"clusterrole-aggregation-controller", // admin/edit/view get their rules
	"validatingadmissionpolicy-status-controller",
}

// kcm is a configured, not yet running, in-process kube-controller-manager.
type kcm struct {
	opts *ctrloptions.KubeControllerManagerOptions
}

// newKCM parses the controller manager's flags. It must run before the
// shared feature-gate registry is Set (see main).
func newKCM(kubeconfig string, p *pki) (*kcm, error) {
	s, err := ctrloptions.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	fs := pflag.NewFlagSet("kube-controller-manager", pflag.ContinueOnError)
	named := s.Flags(ctrlapp.KnownControllers(), ctrlapp.ControllersDisabledByDefault(), ctrlapp.ControllerAliases())
	for _, f := range named.FlagSets {
		fs.AddFlagSet(f)
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=" + strings.Join(controllers, ","),
		"--service-account-private-key-file=" + p.ServiceAccountKey,
		"--root-ca-file=" + p.CACertFile,
		"--use-service-account-credentials=false",
		"--concurrent-gc-syncs=5",
		"--kube-api-qps=200",
		"--kube-api-burst=400",
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("controller manager flags: %w", err)
	}
	return &kcm{opts: s}, nil
}

// run blocks until ctx ends.
func (k *kcm) run(ctx context.Context) error {
	c, err := k.opts.Config(ctx, ctrlapp.KnownControllers(), ctrlapp.ControllersDisabledByDefault(), ctrlapp.ControllerAliases())
	if err != nil {
		return err
	}
	return ctrlapp.Run(ctx, c.Complete())
}
