//go:build !linux

package main

import "syscall"

// childAttr is empty where there is no parent-death signal.
func childAttr() *syscall.SysProcAttr { return nil }
