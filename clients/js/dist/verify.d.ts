export interface ApprovalCheck {
    ok: boolean;
    differences: string[];
}
type Json = any;
/** Check an approval (the JSON of `GET /approvals/{id}` or its `data`) against its raw
 * request: its digest and summary rebuilt here, every difference named by its path. */
export declare function verifyApproval(approval: Json): Promise<ApprovalCheck>;
export {};
