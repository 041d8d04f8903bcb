export declare const PI_AI_PACKAGE: "@mariozechner/pi-ai";
export declare function piAiMissingMessage(purpose: string): string;
export declare function loadPiAi(purpose?: string, importer?: () => Promise<any>): Promise<any>;
