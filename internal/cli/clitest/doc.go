// Package clitest runs a command's main from its own test binary, for the
// tests of the commands in cmd/: the test binary starts itself again with
// an environment variable that makes TestMain call main instead of the
// tests. It is imported by tests only.
package clitest
