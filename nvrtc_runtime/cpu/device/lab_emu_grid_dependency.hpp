// kernels/common/lab_grid_dependency.cuh on the host. The cpu backend runs one launch to completion before
// it starts the next (CpuBackend::launch holds its launch lock for the whole grid), so when a kernel starts,
// every earlier launch has completed and its writes are visible: the state griddepcontrol.wait waits for on
// the GPU holds already, and the wait returns at once. launch_dependents only lets the next launch be
// scheduled early on the GPU (its own wait still waits for this grid to complete); here the next launch
// starts after this one ends whatever the kernel calls, so it is a no-op as well, legal anywhere (before
// the wait, several times, by some threads only), as on the GPU.
#pragma once

inline void lab_grid_dependency_wait() {}

inline void lab_launch_dependents() {}
