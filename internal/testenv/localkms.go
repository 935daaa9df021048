package testenv

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awskms "github.com/aws/aws-sdk-go-v2/service/kms"
)

// LocalKMS is Local KMS (github.com/nsmithuk/local-kms), a server of AWS
// KMS's API that `make tools` builds (hack/local-kms/build.sh), running
// for one test.
type LocalKMS struct {
	// Endpoint is its URL (AWS_ENDPOINT_URL_KMS), Region the region of
	// its keys' ARNs.
	Endpoint, Region string
}

// StartLocalKMS starts Local KMS on a free loopback port, stopped when
// the test ends.
func StartLocalKMS(t TB) *LocalKMS {
	t.Helper()
	bin := versionedTool(t, "local-kms")
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	k := &LocalKMS{Endpoint: "http://" + addr, Region: "eu-west-2"}
	cmd := exec.Command(bin)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Env = append(os.Environ(), "PORT="+port, "KMS_REGION="+k.Region, "KMS_ACCOUNT_ID=111122223333", "KMS_DATA_PATH="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("local-kms: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if resp, err := http.Get(k.Endpoint); err == nil {
			resp.Body.Close()
			return k
		}
		if time.Now().After(deadline) {
			t.Fatalf("local-kms did not answer on %s:\n%s", addr, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Env is what the AWS SDKs (the sops CLI's, Sluice's) need in their
// environment to reach it, with credentials it accepts.
func (k *LocalKMS) Env() []string {
	return []string{"AWS_ENDPOINT_URL_KMS=" + k.Endpoint, "AWS_REGION=" + k.Region, "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local"}
}

// CreateKey creates a symmetric key and returns its ARN.
func (k *LocalKMS) CreateKey(t TB) string {
	t.Helper()
	c := awskms.New(awskms.Options{
		Region: k.Region, BaseEndpoint: aws.String(k.Endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
	})
	out, err := c.CreateKey(context.Background(), &awskms.CreateKeyInput{Description: aws.String("sluice test")})
	if err != nil {
		t.Fatalf("local-kms CreateKey: %v", err)
	}
	if out.KeyMetadata == nil || out.KeyMetadata.Arn == nil {
		t.Fatalf("local-kms CreateKey: no ARN")
	}
	return *out.KeyMetadata.Arn
}
