package e2e

// PID is the controller's process id, for figures read from /proc (CPU
// time, memory high-water mark) by test/benchscale.
func (c *Controller) PID() int { return c.cmd.Process.Pid }
