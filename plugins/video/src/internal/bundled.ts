/**
 * Where ffmpeg and ffprobe come from when none is configured: the machine's `PATH`, else the
 * binaries that ship inside the npm packages `@ffmpeg-installer/ffmpeg` and
 * `@ffprobe-installer/ffprobe` (dependencies of this plugin, so video works after a plain
 * `npm install` on a machine without ffmpeg).
 *
 * Those packages make their binary executable in an install script; a package manager that skips
 * install scripts (pnpm without `allowBuilds`, `npm --ignore-scripts`) leaves the file without its
 * execute bit. Then the binary is copied once into a private folder under the temp directory and
 * made executable there.
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"

const exe = (name: string) => (process.platform === "win32" ? `${name}.exe` : name)

const isExecutableFile = (file: string): boolean => {
  try {
    if (!fs.statSync(file).isFile()) return false
    fs.accessSync(file, fs.constants.X_OK)
    return true
  } catch {
    return false
  }
}

/** The first executable `name` on `PATH`, if any. */
export const findOnPath = (name: string, env: NodeJS.ProcessEnv = process.env): string | undefined => {
  for (const dir of (env.PATH ?? "").split(path.delimiter)) {
    if (dir === "") continue
    const candidate = path.join(dir, exe(name))
    if (isExecutableFile(candidate)) return candidate
  }
  return undefined
}

const packages = { ffmpeg: "@ffmpeg-installer/ffmpeg", ffprobe: "@ffprobe-installer/ffprobe" } as const

export interface Bundled {
  readonly path: string
  /** The npm package it came from, e.g. `@ffmpeg-installer/ffmpeg 4.1.0`. */
  readonly source: string
}

const found = new Map<string, Bundled | null>()

/**
 * The binary shipped in the npm package for this platform, made runnable; `undefined` when the
 * package (or its build for this platform) is not installed.
 */
export const bundled = (name: "ffmpeg" | "ffprobe"): Bundled | undefined => {
  const cached = found.get(name)
  if (cached !== undefined) return cached ?? undefined
  let result: Bundled | null = null
  try {
    const req = createRequire(import.meta.url)
    const info = req(packages[name]) as { readonly path?: string; readonly version?: string }
    if (info.path && fs.existsSync(info.path)) {
      const source = `npm ${packages[name]}${info.version ? ` (${name} ${info.version})` : ""}`
      result = { path: runnable(info.path), source }
    }
  } catch {
    // not installed, or no build for this platform: the caller reports the binary as missing
  }
  found.set(name, result)
  return result ?? undefined
}

/** `file` itself when it can be executed, else an executable copy in a private temp folder. */
export const runnable = (file: string): string => {
  if (isExecutableFile(file)) return file
  try {
    fs.chmodSync(file, 0o755)
    if (isExecutableFile(file)) return file
  } catch {
    // read-only install (a shared store): copy it instead
  }
  const stat = fs.statSync(file)
  const key = crypto.createHash("sha256").update(`${file}\0${stat.size}\0${stat.mtimeMs}`).digest("hex").slice(0, 16)
  const dir = path.join(os.tmpdir(), `musekit-bin-${process.getuid?.() ?? "user"}-${key}`)
  const copy = path.join(dir, path.basename(file))
  if (isExecutableFile(copy) && fs.statSync(copy).size === stat.size) return copy
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const partial = `${copy}.${process.pid}.part`
  fs.copyFileSync(file, partial)
  fs.chmodSync(partial, 0o755)
  fs.renameSync(partial, copy)
  return copy
}
