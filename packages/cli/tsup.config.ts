import { cpSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import type { Plugin } from "esbuild"
import { defineConfig, type Options } from "tsup"
import { writeScriptSum } from "./src/internal/codeCache.js"

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url))
const pkg = JSON.parse(readFileSync(here("./package.json"), "utf8")) as { version: string }

// The @musekit/* packages are bundled from their sources (so the CLI does not depend on their
// build order). Heavy modules are split into chunks loaded on demand (providers, the tokenizer,
// the terminal UI), so `muse --version` loads one small file.
const alias: Record<string, string> = {
  "@musekit/core/testing": here("../core/src/testing.ts"),
  "@musekit/core": here("../core/src/index.ts"),
  "@musekit/node": here("../node/src/index.ts"),
  "@musekit/models": here("../models/src/index.ts"),
  "@musekit/pg/SessionCluster": here("../pg/src/SessionCluster.ts"),
  "@musekit/pg": here("../pg/src/index.ts"),
  "@musekit/plugin-skills": here("../../plugins/skills/src/index.ts"),
  "@musekit/plugin-compaction": here("../../plugins/compaction/src/index.ts"),
  "@musekit/plugin-video": here("../../plugins/video/src/index.ts"),
  "@musekit/plugin-worktree": here("../../plugins/worktree/src/index.ts"),
  "@musekit/plugin-mcp": here("../../plugins/mcp/src/index.ts")
}

// CommonJS packages that only some paths use (the skills plugin's front matter; @effect/cli's file
// options, which muse does not use): loaded on their first call instead of when the CLI loads.
// Each entry names the functions the bundled code calls. yaml, the largest, is not bundled at all
// (a dependency of this package, required from node_modules on first use); the others are bundled.
const lazyPackages: Record<string, ReadonlyArray<string>> = {
  yaml: ["parse", "parseDocument", "isMap"],
  toml: ["parse"],
  ini: ["parse"]
}
const requiredAtRunTime = new Set(["yaml"])
const lazyFirstCall: Plugin = {
  name: "lazy-first-call",
  setup(build) {
    const filter = new RegExp(`^(${Object.keys(lazyPackages).join("|")})$`)
    // one stand-in per package and folder (two folders may resolve two versions)
    const folders = new Map<string, number>()
    build.onResolve({ filter }, (args) => {
      if (args.namespace === "lazy-first-call")
        return requiredAtRunTime.has(args.path) ? { path: args.path, external: true } : undefined
      if (!folders.has(args.resolveDir)) folders.set(args.resolveDir, folders.size)
      return {
        path: `${args.path}#${folders.get(args.resolveDir)}`,
        namespace: "lazy-first-call",
        pluginData: { path: args.path, resolveDir: args.resolveDir }
      }
    })
    build.onLoad({ filter: /.*/, namespace: "lazy-first-call" }, (args) => {
      const { path: name, resolveDir } = args.pluginData as { path: string; resolveDir: string }
      const load = `let m\nconst load = () => (m ??= require(${JSON.stringify(name)}))\n`
      const fns = (lazyPackages[name] ?? []).map((f) => `export const ${f} = (...a) => load().${f}(...a)`)
      return { contents: load + fns.join("\n"), resolveDir, loader: "js" }
    })
  }
}

// What both builds share: the @musekit/* sources bundled in, the same packages left outside, the
// version compiled in.
//
// Everything is bundled (one parse instead of hundreds of module files: about half the start-up
// time) except what must stay a real module: picomatch (loaded with createRequire by
// @musekit/node), and the Anthropic tokenizer and web-tree-sitter (they read a .wasm file beside
// themselves; the bash grammar's .wasm is found with require.resolve).
const outside = ["@anthropic-ai/tokenizer", "picomatch", "web-tree-sitter", "tree-sitter-bash"]
const base = {
  target: "node20",
  platform: "node",
  noExternal: [new RegExp(`^(?!(${outside.map((p) => p.replace(/[/.-]/g, "\\$&")).join("|")})(/|$))`)],
  external: outside,
  define: { __MUSE_VERSION__: JSON.stringify(pkg.version) },
  esbuildPlugins: [lazyFirstCall],
  esbuildOptions(options: Parameters<NonNullable<Options["esbuildOptions"]>>[0]) {
    options.alias = { ...options.alias, ...alias }
  }
} satisfies Options

// gpt-tokenizer (its tables are half of the code) is a file of its own, required on first use
const tokenizer = createRequire(here("../../plugins/compaction/package.json")).resolve("gpt-tokenizer")
const tokenizerApart: Plugin = {
  name: "tokenizer-apart",
  setup(build) {
    build.onResolve({ filter: /^gpt-tokenizer$/ }, () => ({ path: "./boot-gpt-tokenizer.cjs", external: true }))
  }
}
// The commands' code again as one CommonJS script, for bin.js to compile with a V8 code cache
// (Node 20 keeps no compile cache for ES modules; see src/internal/codeCache.ts). Modules behind
// a dynamic import() stay lazy: esbuild wraps them in initialisers that run on first import.
const boot = {
  entry: { boot: "src/internal/main.ts", "boot-gpt-tokenizer": tokenizer },
  format: ["cjs"],
  dts: false,
  clean: false,
  sourcemap: false,
  splitting: false,
  ...base,
  define: { ...base.define, "import.meta.url": "__museImportMetaUrl" },
  banner: { js: 'const __museImportMetaUrl = require("node:url").pathToFileURL(__filename).href;' },
  esbuildPlugins: [...base.esbuildPlugins, tokenizerApart],
  esbuildOptions(options) {
    base.esbuildOptions(options)
    // ASCII only and no comments or white space: V8 reads it as a one-byte string and its cache
    // checks fewer bytes; names are kept, so stack traces still read
    options.charset = "ascii"
    options.minifyWhitespace = true
    options.minifySyntax = true
    // import() of a package left outside becomes require(): a script compiled with node:vm has
    // no module loader of its own
    options.supported = { ...options.supported, "dynamic-import": false }
  },
  onSuccess: async () => {
    // what esbuild leaves unescaped (characters in regular expressions) becomes \u escapes
    const file = here("./dist/boot.cjs")
    const text = readFileSync(file, "utf8")
    const ascii = text.replace(/[^\0-\x7f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
    if (ascii !== text) writeFileSync(file, ascii)
    // its sum, read at start instead of hashing the script (src/internal/codeCache.ts)
    writeScriptSum(file)
  }
} satisfies Options

const esm = {
  entry: ["src/index.ts", "src/bin.ts"],
  format: ["esm"],
  dts: { entry: "src/index.ts" },
  // (the CommonJS build writes beside this one at the same time)
  clean: ["!boot.cjs", "!boot.cjs.sum", "!boot-gpt-tokenizer.cjs"],
  sourcemap: true,
  splitting: true,
  ...base,
  banner: {
    js: 'import { createRequire as __museRequire } from "node:module"; const require = __museRequire(import.meta.url);'
  },
  onSuccess: async () => {
    // the skills plugin reads its prompt files from ../prompts/ beside the code that uses them
    const prompts = here("../../plugins/skills/prompts")
    rmSync(here("./prompts"), { recursive: true, force: true })
    if (existsSync(prompts)) cpSync(prompts, here("./prompts"), { recursive: true })
  }
} satisfies Options

export default defineConfig([esm, boot])
