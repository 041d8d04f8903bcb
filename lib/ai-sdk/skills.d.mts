import type { SkillMetadata, Sandbox } from "./index.mjs";
export interface DiscoverSkillsOptions { paths?: string[]; cwd?: string }
export interface SkillBundle { name: string; files: Record<string, string> }
export type SkillContent = string | SkillBundle;
export interface AgentEnvironmentConfig { workspace?: Record<string, string>; skills?: Record<string, SkillContent> }
export interface SetupResult { skills: SkillMetadata[] }
export declare function discoverSkills(options?: DiscoverSkillsOptions): Promise<SkillMetadata[]>;
export declare function parseSkillMetadata(content: string, skillPath: string): SkillMetadata;
export declare function skillsToXml(skills: SkillMetadata[]): string;
export declare function loadSkillBundle(skillDir: string): Promise<SkillBundle>;
export declare function loadSkillBundles(skills: SkillMetadata[]): Promise<Record<string, SkillBundle>>;
export declare function fetchSkill(ref: string, options?: { fetch?: typeof fetch }): Promise<SkillBundle>;
export declare function fetchSkills(refs: string[], options?: { fetch?: typeof fetch }): Promise<Record<string, SkillBundle>>;
export declare function setupAgentEnvironment(sandbox: Sandbox, config: AgentEnvironmentConfig): Promise<SetupResult>;
