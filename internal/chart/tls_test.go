package chart_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bpfperf/bpfperf/internal/chart"
	"github.com/bpfperf/bpfperf/internal/node"
)

// webSecret is the Secret the chart's metrics.webConfigSecret names, as a
// user makes it: an exporter-toolkit web config turning TLS on, and the
// certificate and key it names (relative paths: beside the config, in
// the chart's mount), issued for 127.0.0.1 by a CA of the test's own.
type webSecret struct {
	data map[string][]byte
	ca   *x509.CertPool
	cert []byte // the server certificate, DER
}

func newWebSecret(t *testing.T) webSecret {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bpfperf chart test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "bpfperf"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return webSecret{
		data: map[string][]byte{
			"web-config.yml": []byte("tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n"),
			"tls.crt":        pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			"tls.key":        pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		},
		ca:   pool,
		cert: der,
	}
}

// checkTLSListener: the pod's listener at addr (host:port) serves
// /metrics over TLS with the secret's certificate, verified against the
// test's CA; a client that does not trust the CA is refused the
// handshake; plain HTTP gets no metrics; and over TLS too nothing that
// changes state is served.
func checkTLSListener(t *testing.T, addr string, s webSecret, prog string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.ca}}}
	resp, err := client.Get("https://" + addr + "/metrics")
	if err != nil {
		t.Errorf("GET https://%s/metrics with the test's CA: %v", addr, err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "bpfperf_program_runs_total{") {
		t.Errorf("GET https://%s/metrics: %s, %d bytes without bpfperf_program_runs_total", addr, resp.Status, len(body))
	}
	if pc := resp.TLS.PeerCertificates; len(pc) == 0 || !bytes.Equal(pc[0].Raw, s.cert) {
		t.Errorf("the listener's certificate is not the secret's tls.crt")
	}
	t.Logf("GET https://%s/metrics: %s, %d bytes, %s, certificate %q from the chart's secret", addr, resp.Status, len(body), tls.VersionName(resp.TLS.Version), resp.TLS.PeerCertificates[0].Subject.CommonName)

	if resp, err := client.Post("https://"+addr+"/v1/counters/enable?prog="+prog, "application/json", nil); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /v1/counters/enable over TLS: %v %v, want 405", resp, err)
	} else {
		resp.Body.Close()
	}

	// The system's roots do not hold the test's CA: the handshake fails.
	untrusting := &http.Client{Timeout: 10 * time.Second}
	if resp, err := untrusting.Get("https://" + addr + "/metrics"); err == nil {
		resp.Body.Close()
		t.Errorf("GET https://%s/metrics without the test's CA: %s, want a certificate error", addr, resp.Status)
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("GET https://%s/metrics without the test's CA: %v, want a certificate error", addr, err)
	}

	// Plain HTTP: Go's TLS server answers a request that is not a
	// handshake with 400 and closes, serving nothing.
	resp, err = untrusting.Get("http://" + addr + "/metrics")
	if err == nil {
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 || strings.Contains(string(body), "bpfperf_") {
			t.Errorf("GET http://%s/metrics (plain HTTP): %s, %q: want it refused", addr, resp.Status, body)
		}
		t.Logf("GET http://%s/metrics (plain HTTP): %s %q", addr, resp.Status, strings.TrimSpace(string(body)))
	} else {
		t.Logf("GET http://%s/metrics (plain HTTP): %v", addr, err)
	}
}

// TestPodSecretVolume: the chart's web config Secret becomes, in the
// node's pod spec, a read-only mount at the path --web.config.file
// names, holding the Secret's files with the Secret volume's default
// mode; without the Secret given, the pod is not made, in one line.
func TestPodSecretVolume(t *testing.T) {
	objs := renderFor(t, t.TempDir(), "--set", "metrics.enabled=true", "--set", "metrics.webConfigSecret=bpfperf-web")
	env := chart.Env{Fields: map[string]string{"status.podIP": "127.0.0.1"}, VolumeDir: t.TempDir()}
	if _, _, err := chart.Pod(objs.DaemonSet, "monitoring", "p", env); err == nil || !strings.Contains(err.Error(), "secret bpfperf-web: not given to the node") {
		t.Errorf("pod without its Secret: %v, want the Secret named as missing", err)
	}

	s := newWebSecret(t)
	env.Secrets = map[string]map[string][]byte{"bpfperf-web": s.data}
	spec, _, err := chart.Pod(objs.DaemonSet, "monitoring", "p", env)
	if err != nil {
		t.Fatal(err)
	}
	c := spec.Containers[0]
	var config string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--web.config.file="); ok {
			config = v
		}
	}
	if config == "" {
		t.Fatalf("args %q: no --web.config.file", c.Args)
	}
	var m *node.Mount
	for i := range c.Mounts {
		if c.Mounts[i].Container == filepath.Dir(config) {
			m = &c.Mounts[i]
		}
	}
	if m == nil || m.Writable {
		t.Fatalf("mounts %+v: want %s read-only", c.Mounts, filepath.Dir(config))
	}
	for k, v := range s.data {
		p := filepath.Join(m.Host, k)
		b, err := os.ReadFile(p)
		if fi, _ := os.Stat(p); err != nil || !bytes.Equal(b, v) || fi.Mode() != 0o644 {
			t.Errorf("%s in the secret's volume: %v, %d bytes of %d, mode %v: want the Secret's, mode 0644", k, err, len(b), len(v), fi.Mode())
		}
	}
	if _, ok := s.data[filepath.Base(config)]; !ok {
		t.Errorf("--web.config.file=%s names no key of the Secret", config)
	}
}
