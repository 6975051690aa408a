// Command drover runs drover nodes, the demo, the simulator and the
// operator tools. See README.md.
package main
