/**
 * Folder trust. A folder's own files that give muse power — `.muse/config.json` (approval mode,
 * rules, model, budget), `.muse/mcp.json` (MCP servers: programs it starts), `.muse/permissions.json` (allow rules) and the project's `SKILL.md` files
 * (`.muse/skills`, `.claude/skills`) — take effect only in a folder the user trusted. Trust is
 * recorded in `trusted.json` beside the user's config file, per folder, with a sha256 of each of
 * those files: when any of them changes, appears or goes away, the folder is asked about again.
 *
 * `AGENTS.md` is not among them: it is instructions to the model, which is untrusted anyway, and
 * grants nothing: every tool call still goes through the approvals the user set.
 *
 * @example
 * ```ts
 * import * as Trust from "./trust.js"
 *
 * const project = Trust.scan("/work/app")
 * if (project.files.length > 0 && Trust.status(project, process.env)._tag !== "trusted") {
 *   console.log(Trust.describe(project, plain).join("\n")) // "approvalMode auto", "3 rules: …"
 * }
 * ```
 */
import { createHash } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { Approvals } from "@musekit/core"
import { SkillFiles } from "@musekit/plugin-skills"
import { Effect, Either, Schema } from "effect"
import { escapeUnsafe, type Style } from "./ansi.js"
import * as Config from "./config.js"
import { CliError, ExitCode } from "./exit.js"

export interface ProjectFile {
  /** Relative to the folder, with `/`. */
  readonly rel: string
  /** sha256 hex of the bytes (`unreadable` when they cannot be read). */
  readonly hash: string
  readonly text: string | undefined
}

export interface Project {
  /** The folder (real path). */
  readonly root: string
  /** Its files that would take effect if trusted, sorted; none means there is nothing to trust. */
  readonly files: ReadonlyArray<ProjectFile>
}

const sha256 = (b: Buffer) => createHash("sha256").update(b).digest("hex")

const readFile = (abs: string, rel: string): ProjectFile | undefined => {
  try {
    if (!fs.statSync(abs).isFile()) return undefined
  } catch {
    return undefined
  }
  try {
    const bytes = fs.readFileSync(abs)
    return { rel, hash: sha256(bytes), text: bytes.toString("utf8") }
  } catch {
    return { rel, hash: "unreadable", text: undefined }
  }
}

/** The files of `root` that trust covers (the skill folders are the ones the skills plugin reads). */
export const scan = (root: string): Project => {
  const files: Array<ProjectFile> = []
  for (const rel of [".muse/config.json", ".muse/mcp.json", ".muse/permissions.json"]) {
    const f = readFile(path.join(root, rel), rel)
    if (f) files.push(f)
  }
  for (const r of SkillFiles.roots({ projectDir: root, userDir: null })) {
    let entries: Array<string>
    try {
      entries = fs.readdirSync(r.dir)
    } catch {
      continue
    }
    for (const name of entries.sort()) {
      const f = readFile(path.join(r.dir, name, "SKILL.md"), `${r.display}/${name}/SKILL.md`)
      if (f) files.push(f)
    }
  }
  files.sort((a, b) => (a.rel < b.rel ? -1 : a.rel > b.rel ? 1 : 0))
  return { root, files }
}

// ---------------------------------------------------------------------------------------------
// the record

const Entry = Schema.Struct({
  trustedAt: Schema.String,
  /** sha256 of every file that took effect, by its path relative to the folder. */
  files: Schema.Record({ key: Schema.String, value: Schema.String })
})
const TrustFile = Schema.Struct({
  folders: Schema.Record({ key: Schema.String, value: Entry })
})
type TrustFile = typeof TrustFile.Type

/** `trusted.json` beside the user's config file. */
export const trustFile = (env: NodeJS.ProcessEnv = process.env): string =>
  path.join(path.dirname(Config.userConfigFile(env)), "trusted.json")

const readRecord = (file: string): Either.Either<TrustFile, string> => {
  let text: string
  try {
    text = fs.readFileSync(file, "utf8")
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return Either.right({ folders: {} })
    return Either.left(`${file} cannot be read: ${(e as Error).message}`)
  }
  try {
    return Either.mapLeft(
      Schema.decodeUnknownEither(TrustFile)(JSON.parse(text)),
      () => `${file} is not a valid trust file`
    )
  } catch (e) {
    return Either.left(`${file} is not valid JSON: ${(e as Error).message}`)
  }
}

export type Status =
  /** No file that trust covers: nothing to decide. */
  | { readonly _tag: "nothing" }
  | { readonly _tag: "trusted" }
  | { readonly _tag: "untrusted"; readonly problem?: string | undefined }
  /** Trusted once, but these files changed, appeared or went away since. */
  | { readonly _tag: "changed"; readonly changed: ReadonlyArray<string> }

/** The hash of every file, by its path. */
export const fingerprint = (project: Project): Record<string, string> =>
  Object.fromEntries(project.files.map((f) => [f.rel, f.hash]))

export const status = (project: Project, env: NodeJS.ProcessEnv = process.env): Status => {
  if (project.files.length === 0) return { _tag: "nothing" }
  const record = readRecord(trustFile(env))
  if (Either.isLeft(record)) return { _tag: "untrusted", problem: record.left }
  const entry = record.right.folders[project.root]
  if (!entry) return { _tag: "untrusted" }
  const now = fingerprint(project)
  const names = [...new Set([...Object.keys(now), ...Object.keys(entry.files)])].sort()
  const changed = names.filter((n) => now[n] !== entry.files[n] || now[n] === "unreadable")
  return changed.length === 0 ? { _tag: "trusted" } : { _tag: "changed", changed }
}

const writeRecord = (file: string, record: TrustFile): void => {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 })
  const tmp = `${file}.${process.pid}.tmp`
  fs.writeFileSync(tmp, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 })
  fs.renameSync(tmp, file)
}

const update = (env: NodeJS.ProcessEnv, change: (r: TrustFile) => TrustFile): Effect.Effect<void, CliError> =>
  Effect.suspend(() => {
    const file = trustFile(env)
    const record = readRecord(file)
    if (Either.isLeft(record)) {
      return Effect.fail(
        new CliError({
          code: ExitCode.Usage,
          message: `${record.left}; fix it or remove it (it lists the folders you trusted)`
        })
      )
    }
    return Effect.try({
      try: () => writeRecord(file, change(record.right)),
      catch: (e) => new CliError({ code: ExitCode.Failed, message: `${file}: ${(e as Error).message}` })
    })
  })

/** Record that the user trusts the folder with its files as they are now. */
export const record = (project: Project, env: NodeJS.ProcessEnv = process.env): Effect.Effect<void, CliError> =>
  update(env, (r) => ({
    folders: {
      ...r.folders,
      [project.root]: { trustedAt: new Date().toISOString(), files: fingerprint(project) }
    }
  }))

/** Forget the folder. Succeeds with whether it was trusted. */
export const revoke = (root: string, env: NodeJS.ProcessEnv = process.env): Effect.Effect<boolean, CliError> =>
  Effect.suspend(() => {
    let had = false
    return update(env, (r) => {
      had = root in r.folders
      const { [root]: _gone, ...rest } = r.folders
      return { folders: rest }
    }).pipe(Effect.map(() => had))
  })

const canonical = (v: unknown): string =>
  JSON.stringify(v, (_k, x) =>
    x && typeof x === "object" && !Array.isArray(x)
      ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : x
  )

/**
 * After a "yes, always" answer, `.muse/permissions.json` holds a rule the user just confirmed.
 * Take the file's new hash into the record (so the folder does not ask about the user's own rule)
 * only when every other file is exactly as in `baseline` (what was trusted; `{}` for a folder that
 * had nothing to trust) and every rule in the file is one it held then (`rulesAtStart`) or one the
 * user saved in this session (`saved`). A rule written by anything else still makes it ask again.
 */
export const acceptSavedRules = (options: {
  readonly root: string
  readonly baseline: Readonly<Record<string, string>>
  readonly rulesAtStart: ReadonlyArray<unknown>
  readonly saved: ReadonlyArray<unknown>
  readonly env?: NodeJS.ProcessEnv | undefined
}): boolean => {
  const env = options.env ?? process.env
  const rel = ".muse/permissions.json"
  const now = scan(options.root)
  const file = now.files.find((f) => f.rel === rel)
  if (!file?.text) return false
  let rules: ReadonlyArray<unknown>
  try {
    const json = JSON.parse(file.text) as { rules?: unknown }
    if (!Array.isArray(json.rules)) return false
    rules = json.rules
  } catch {
    return false
  }
  const known = new Set([...options.rulesAtStart, ...options.saved].map(canonical))
  if (!rules.every((r) => known.has(canonical(r)))) return false
  const others = (files: Readonly<Record<string, string>>) =>
    canonical(Object.fromEntries(Object.entries(files).filter(([k]) => k !== rel)))
  if (others(fingerprint(now)) !== others(options.baseline)) return false
  const record = readRecord(trustFile(env))
  if (Either.isLeft(record)) return false
  try {
    writeRecord(trustFile(env), {
      folders: {
        ...record.right.folders,
        [options.root]: {
          trustedAt: record.right.folders[options.root]?.trustedAt ?? new Date().toISOString(),
          files: { ...options.baseline, [rel]: file.hash }
        }
      }
    })
    return true
  } catch {
    return false
  }
}

// ---------------------------------------------------------------------------------------------
// what a folder would set

const MAX_RULES = 6

const ruleLines = (rules: ReadonlyArray<unknown>, style: Style): Array<string> => {
  const shown = rules.slice(0, MAX_RULES).map((r) => {
    const decoded = Schema.decodeUnknownEither(Approvals.Rule)(r)
    return `    ${escapeUnsafe(Either.isRight(decoded) ? Approvals.describeRule(decoded.right) : JSON.stringify(r), style)}`
  })
  if (rules.length > MAX_RULES) shown.push(`    … and ${rules.length - MAX_RULES} more`)
  return shown
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? "" : "s"}`

/**
 * What the folder's files would set, one line per setting, escaped: the person deciding sees what
 * the files say, not what they would like to show.
 */
export const describe = (project: Project, style: Style): Array<string> => {
  const out: Array<string> = []
  const e = (s: string) => escapeUnsafe(s, style)
  for (const f of project.files) {
    if (f.text === undefined) {
      out.push(`  ${e(f.rel)}: cannot be read`)
      continue
    }
    if (f.rel === ".muse/config.json" || f.rel === ".muse/permissions.json") {
      let json: any
      try {
        json = JSON.parse(f.text)
      } catch {
        out.push(`  ${e(f.rel)}: not valid JSON (an error if trusted)`)
        continue
      }
      if (typeof json !== "object" || json === null || Array.isArray(json)) {
        out.push(`  ${e(f.rel)}: not a JSON object (an error if trusted)`)
        continue
      }
      const sets: Array<string> = []
      const rules: Array<unknown> = Array.isArray(json.rules) ? json.rules : []
      for (const [k, v] of Object.entries(json)) {
        if (k === "rules" || k === "$schema") continue
        sets.push(
          k === "stateDir" || k === "log"
            ? `${k} ${JSON.stringify(v)} (never used: a project cannot choose where sessions are stored)`
            : `${k} ${JSON.stringify(v)}`
        )
      }
      if (rules.length > 0) sets.push(plural(rules.length, "rule"))
      out.push(`  ${e(f.rel)} sets ${sets.length > 0 ? e(sets.join(", ")) : "nothing"}`)
      if (rules.length > 0) out.push(...ruleLines(rules, style))
      continue
    }
    const parsed = SkillFiles.parse(f.text, f.rel, { displayPath: f.rel })
    out.push(
      Either.isRight(parsed)
        ? `  ${e(f.rel)}: the skill /${e(parsed.right.name)} (${e(parsed.right.description.slice(0, 120))})`
        : `  ${e(f.rel)}: a skill file that cannot be used`
    )
  }
  return out
}
