package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// containerSpec is what pod-init needs to turn itself into one container:
// the agent writes it as JSON next to the container's root directory.
type containerSpec struct {
	// Rootfs becomes the container's "/". It is a directory the agent made;
	// pod-init creates the mount points it needs inside it.
	Rootfs string `json:"rootfs"`
	// NetNS and UTSNS are the pod's namespaces (held by its pause process).
	NetNS string `json:"netns"`
	UTSNS string `json:"utsns"`
	// Mounts in order; targets are paths inside the container.
	Mounts []mountSpec `json:"mounts"`
	// ReadOnlyRoot remounts "/" read-only (readOnlyRootFilesystem).
	ReadOnlyRoot bool     `json:"readOnlyRoot"`
	UID          int      `json:"uid"`
	GID          int      `json:"gid"`
	Groups       []int    `json:"groups,omitempty"`
	NoNewPrivs   bool     `json:"noNewPrivs"`
	Argv         []string `json:"argv"`
	Env          []string `json:"env"`
	Dir          string   `json:"dir"`
}

// mountSpec is one mount of a container: a bind of a host path, or a proc.
type mountSpec struct {
	Source   string `json:"source,omitempty"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
	// Proc mounts a procfs (the host's PID view: pods share the PID namespace).
	Proc bool `json:"proc,omitempty"`
}

// cmdPause holds a pod's network and UTS namespaces while its containers come
// and go (the role of the kubelet's pause container). It is started in new
// namespaces by the agent, names its host and sleeps until told to stop.
func cmdPause(args []string) error {
	fs := flag.NewFlagSet("pause", flag.ContinueOnError)
	hostname := fs.String("hostname", "", "pod host name")
	_ = fs.String("state-dir", "", "state directory of the cluster (names the process as ours)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *hostname != "" {
		if err := unix.Sethostname([]byte(*hostname)); err != nil {
			return fmt.Errorf("sethostname: %w", err)
		}
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return nil
}

// cmdPodInit becomes one container: it joins the pod's network and UTS
// namespaces, builds the container's view of the filesystem in the private
// mount namespace the agent started it in, drops to the pod's user and execs
// the container's program. Nothing it mounts is visible outside, and all of
// it goes away with the process.
func cmdPodInit(args []string) error {
	if len(args) != 1 {
		return errors.New("usage: localcluster pod-init SPEC.json")
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	var s containerSpec
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	// Namespaces joined with setns belong to this thread only: everything
	// from here to exec runs on it, and exec keeps only this thread.
	runtime.LockOSThread()
	for _, ns := range []struct {
		path string
		kind int
	}{{s.NetNS, unix.CLONE_NEWNET}, {s.UTSNS, unix.CLONE_NEWUTS}} {
		if ns.path == "" {
			continue
		}
		if err := setns(ns.path, ns.kind); err != nil {
			return err
		}
	}
	if err := buildRoot(s); err != nil {
		return err
	}
	if err := unix.Chroot(s.Rootfs); err != nil {
		return fmt.Errorf("chroot %s: %w", s.Rootfs, err)
	}
	dir := s.Dir
	if dir == "" {
		dir = "/"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil && !s.ReadOnlyRoot {
		return err
	}
	if err := unix.Chdir(dir); err != nil {
		return fmt.Errorf("chdir %s: %w", dir, err)
	}
	if s.ReadOnlyRoot {
		if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("read-only root: %w", err)
		}
	}
	if err := unix.Setgroups(s.Groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if err := unix.Setgid(s.GID); err != nil {
		return fmt.Errorf("setgid: %w", err)
	}
	if err := unix.Setuid(s.UID); err != nil {
		return fmt.Errorf("setuid: %w", err)
	}
	if s.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
	}
	if len(s.Argv) == 0 {
		return errors.New("container has no command")
	}
	prog := s.Argv[0]
	if !strings.Contains(prog, "/") {
		for _, d := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
			if _, err := os.Stat(filepath.Join(d, prog)); err == nil {
				prog = filepath.Join(d, prog)
				break
			}
		}
	}
	if err := unix.Exec(prog, s.Argv, s.Env); err != nil {
		return fmt.Errorf("exec %s: %w", prog, err)
	}
	return nil
}

func setns(path string, kind int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), kind); err != nil {
		return fmt.Errorf("setns %s: %w", path, err)
	}
	return nil
}

// buildRoot makes s.Rootfs a mount of its own (so it can be made read-only)
// and mounts every volume into it.
func buildRoot(s containerSpec) error {
	if err := unix.Mount(s.Rootfs, s.Rootfs, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind root: %w", err)
	}
	for _, m := range s.Mounts {
		target := filepath.Join(s.Rootfs, m.Target)
		if m.Proc {
			if err := os.MkdirAll(target, 0o555); err != nil {
				return err
			}
			if err := unix.Mount("proc", target, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
				return fmt.Errorf("mount proc: %w", err)
			}
			continue
		}
		st, err := os.Stat(m.Source)
		if err != nil {
			return fmt.Errorf("volume source %s: %w", m.Source, err)
		}
		if err := mountPoint(target, st.IsDir()); err != nil {
			return err
		}
		if err := unix.Mount(m.Source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", m.Source, m.Target, err)
		}
		if m.ReadOnly {
			if err := unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("read-only %s: %w", m.Target, err)
			}
		}
	}
	return nil
}

// mountPoint creates a directory or an empty file to mount on.
func mountPoint(path string, dir bool) error {
	if dir {
		return os.MkdirAll(path, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}
