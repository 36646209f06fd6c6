"""Fit a pose to target joint positions with Adam, through skeletal.torch's differentiable FK.

The targets are the world positions of a model's nodes in a random pose (fixed seed); the unknowns
are every node's local rotation as a 6D rotation plus the root's translation, starting at the rest
pose. Bone lengths come from the rig (translations other than the root's stay at rest), so only
the rotations have to be found.

    python examples/fit_pose.py                       # the built-in character, 150 Adam steps
    python examples/fit_pose.py Soldier.glb --steps 200 --seed 3 --out fitted.glb

With ``--out`` the fitted pose is written as a one-key clip (``skeletal.torch.tensors_to_clip``)
into a copy of the model, which any glTF viewer shows.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import torch

import skeletal
import skeletal.demo
import skeletal.quat
import skeletal.torch as st


def random_pose(rig: skeletal.Rig, seed: int = 0, max_angle: float = 0.4) -> torch.Tensor:
    """The rest pose with every rotation turned by a random angle up to ``max_angle`` radians about a
    random axis, and the root moved up to 10% of the rig's size: (N, 10) float64."""
    rng = np.random.default_rng(seed)
    n = len(rig)
    axis = rng.normal(size=(n, 3))
    axis /= np.linalg.norm(axis, axis=1, keepdims=True)
    angle = rng.uniform(0.0, max_angle, size=(n, 1))
    turn = np.concatenate([axis * np.sin(angle / 2), np.cos(angle / 2)], axis=1)
    pose = rig.rest.copy()
    pose[:, 3:7] = skeletal.quat.quat_mul(rig.rest[:, 3:7], turn)
    world = skeletal.world_matrices(rig.parents, rig.rest)
    size = float(np.ptp(world[:, :3, 3], axis=0).max()) or 1.0
    roots = rig.parents < 0
    pose[roots, 0:3] += rng.uniform(-0.1, 0.1, size=(int(roots.sum()), 3)) * size
    return torch.as_tensor(pose)


def fitted_nodes(asset: skeletal.Asset) -> torch.Tensor:
    """The nodes whose positions are fitted: every skin's joints, or all nodes of a skinless rig (BVH)."""
    if asset.skins:
        return torch.as_tensor(np.unique(np.concatenate([s.joints for s in asset.skins])))
    return torch.arange(len(asset.rig))


def fit_pose(rig: skeletal.Rig, targets: torch.Tensor, nodes: torch.Tensor, steps: int = 150, lr: float = 0.1,
             dtype: torch.dtype = torch.float32, device=None) -> tuple[torch.Tensor, list[float]]:
    """Local pose rows (N, 10) whose positions of ``nodes`` (M,) match ``targets`` (M, 3), found by Adam
    over every node's 6D rotation and the roots' translations (starting from the rest pose with the
    roots moved onto their targets; Adam with betas (0.8, 0.99)). Returns the pose and the mean position
    error (model units) before each step and after the last."""
    rig_t = st.rig_tensors(rig, device=device, dtype=dtype)
    targets = targets.to(device=rig_t.device, dtype=dtype)
    nodes = nodes.to(device=rig_t.device)
    rest = rig_t.rest
    rot6d = st.quat_to_rot6d(rest[:, 3:7]).clone().requires_grad_(True)
    roots = rig_t.parents < 0
    root_shift = torch.zeros(int(roots.sum()), 3, dtype=dtype, device=rig_t.device, requires_grad=True)
    root_rows = torch.zeros(len(rig_t), int(roots.sum()), dtype=dtype, device=rig_t.device)
    root_rows[torch.nonzero(roots).squeeze(1), torch.arange(int(roots.sum()))] = 1.0
    with torch.no_grad():  # start every fitted root at its target (the rest of the body follows it)
        rest_positions = st.joint_positions(st.world_matrices(rig_t, rest))
        for r, node in enumerate(torch.nonzero(roots).squeeze(1).tolist()):
            hit = torch.nonzero(nodes == node)
            if len(hit):
                root_shift[r] = targets[hit[0, 0]] - rest_positions[node]
    optimizer = torch.optim.Adam([rot6d, root_shift], lr=lr, betas=(0.8, 0.99))

    def positions():
        translations = rest[:, 0:3] + root_rows @ root_shift     # only the roots move
        world = st.world_from_rotations(rig_t, rot6d, translations)
        return st.joint_positions(world).index_select(0, nodes)

    history = []
    for _ in range(steps):
        optimizer.zero_grad()
        error = (positions() - targets).norm(dim=-1)
        history.append(float(error.detach().mean()))
        (error.square().mean()).backward()
        optimizer.step()
    with torch.no_grad():
        history.append(float((positions() - targets).norm(dim=-1).mean()))
        translations = rest[:, 0:3] + root_rows @ root_shift
        pose = st.compose_pose(rig_t, rot6d, translations)
    return pose.detach(), history


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", help="a model file (default: the built-in character)")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--out", help="write the model with the fitted pose as a clip (.glb)")
    args = parser.parse_args(argv)
    asset = skeletal.load(args.model) if args.model else skeletal.demo.demo_asset()
    rig = asset.rig
    target_pose = random_pose(rig, args.seed)
    nodes = fitted_nodes(asset)
    targets = st.joint_positions(st.world_matrices(st.rig_tensors(rig, dtype=torch.float64), target_pose))[nodes]
    pose, history = fit_pose(rig, targets, nodes, steps=args.steps, lr=args.lr)
    print(f"{asset.name}: {len(nodes)} joints, mean joint error {history[0]:.4g} -> {history[-1]:.3g} "
          f"(model units) in {args.steps} Adam steps")
    for step in sorted({0, 10, 25, 50, 100, args.steps}):
        if step <= args.steps:
            print(f"  step {step:4d}: {history[step]:.4g}")
    if args.out:
        clip = st.tensors_to_clip(pose, rig, name="fitted")
        skeletal.export(asset, args.out, [clip])
        print(f"wrote {args.out}")
    if not math.isfinite(history[-1]):
        raise SystemExit("the fit diverged")


if __name__ == "__main__":
    main()
