#!/usr/bin/env node
// One command from a fresh clone: make sure pnpm 12.4.2 is available, install from the lockfile, build.
import { execSync, spawnSync } from "node:child_process"

const PNPM = "12.4.2"
const run = (cmd, env = {}) => {
  console.log(`\n$ ${cmd}`)
  const r = spawnSync(cmd, { stdio: "inherit", shell: true, env: { ...process.env, ...env } })
  if (r.status !== 0) {
    console.error(`\nsetup failed at: ${cmd}`)
    process.exit(r.status ?? 1)
  }
}
const [major, minor] = process.versions.node.split(".").map(Number)
if (major < 20 || (major === 20 && minor < 19)) {
  console.error(`MuseKit needs Node >= 20.19 (this is ${process.versions.node}).`)
  process.exit(1)
}
let have = ""
try {
  have = execSync("pnpm -v", { stdio: ["ignore", "pipe", "ignore"] })
    .toString()
    .trim()
} catch {}
if (have !== PNPM) {
  console.log(have ? `pnpm ${have} found; installing pnpm ${PNPM}` : `pnpm not found; installing pnpm ${PNPM}`)
  run(`npm install -g pnpm@${PNPM}`)
}
run("pnpm install --frozen-lockfile", { CI: "true" })
run("pnpm build")
console.log("\nMuseKit is installed and built. Run the tests with: pnpm test")
